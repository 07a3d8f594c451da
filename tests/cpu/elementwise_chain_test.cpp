// The elementwise engine's chain path (ProgramCfg::chain: the running value in registers
// through every step) against its block path (each instruction a pass over a block) on the same
// program: the same bytes, for every vector ISA here. Programs: PP-OCR's hardswish (Add, Clip,
// Mul, Div by scalars), an operand on the left (3 - x), per-channel broadcast operands (a batch
// norm's scale and shift), a vector second input, every unary op the chain runs, and lengths
// around the vector and group sizes (tails through padded copies). Inputs carry NaN, infinities
// and signed zeros, where Max, Min and Clip must keep the spans' choices (of two NaNs either may
// come out, as between any two compilations of a product). Programs that are not chains (a result
// used twice, two live results) keep the block path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "ir/op_table.h"
#include "backends/cpu/kernels/elementwise_engine.h"
#include "gemm_test_util.h"

namespace rlx::test {
namespace {

using cpu::ew::InstrSpec;

std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v = random_floats(n, seed, -4.0f, 4.0f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 3.0f, -3.0f, 6.0f};
  for (size_t i = 0; i < n; i += 7) v[i] = specials[(i / 7) % 8];
  return v;
}

struct Input {
  std::vector<int64_t> dims;
  std::vector<float> data;
};

// Runs `specs` over the inputs through the chain path and the block path of the same build;
// expects the program to be a chain or not as `chain` says.
void check(const std::vector<InstrSpec>& specs, const std::vector<Input>& ins, const std::vector<int64_t>& out_dims,
           bool chain) {
  for (const char* isa : isa_levels_here()) {
    if (std::string(isa) == "scalar") continue;  // no vector table: no chains
    IsaOverride o(isa);
    SCOPED_TRACE(std::string("RLX_ISA=") + isa);
    std::vector<Shape> shapes;
    for (const Input& in : ins) shapes.emplace_back(in.dims, DType::F32);
    std::vector<const Shape*> ptrs;
    for (const Shape& s : shapes) ptrs.push_back(&s);
    const cpu::ew::ProgramCfg with = cpu::ew::build_program(specs, ptrs, Shape(out_dims, DType::F32), "test",
                                                            cpu::detect_isa());
    ASSERT_EQ(with.chain_fn != nullptr, chain);
    if (!chain) continue;
    cpu::ew::ProgramCfg without = with;
    without.chain_fn = nullptr;
    int64_t n = 1;
    for (int64_t d : out_dims) n *= d;
    std::vector<float> a(size_t(n), 1.0f), b(size_t(n), 2.0f);
    std::vector<void*> bufs;
    for (const Input& in : ins) bufs.push_back(const_cast<float*>(in.data.data()));
    bufs.push_back(a.data());
    cpu::ew::run_program(cpu::RunCtx{}, &with, bufs.data());
    bufs.back() = b.data();
    cpu::ew::run_program(cpu::RunCtx{}, &without, bufs.data());
    // The same bits, except that of two NaNs either may come out (x * sigmoid(x) at x = NaN:
    // the compiler may commute the product, and x86 returns the first operand's NaN).
    for (size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) {
        uint32_t ua, ub;
        std::memcpy(&ua, &a[i], 4);
        std::memcpy(&ub, &b[i], 4);
        ADD_FAILURE() << "chain and block paths differ at " << i << ": " << a[i] << " (0x" << std::hex << ua << ") vs "
                      << b[i] << " (0x" << ub << ")" << std::dec;
        break;
      }
  }
}

InstrSpec ins(OpKind k, std::vector<int32_t> args, double alpha = 0, double beta = 0) {
  return InstrSpec{k, std::move(args), alpha, beta, DType::F32};
}

TEST(ElementwiseChain, HardSwishGivesTheBlockPathsBytes) {
  // x * clip(x + 3, 0, 6) / 6 with 3 and 6 as scalar inputs: inputs 0 (x), 1 (3), 2 (6).
  const std::vector<InstrSpec> p = {ins(OpKind::Add, {0, 1}), ins(OpKind::Clip, {3}, 0, 6), ins(OpKind::Mul, {0, 4}),
                                    ins(OpKind::Div, {5, 2})};
  for (int64_t w : {1, 15, 16, 17, 63, 64, 65, 80, 1000}) {
    SCOPED_TRACE(w);
    check(p, {{{2, 3, w}, values(size_t(6 * w), 1)}, {{}, {3.0f}}, {{1}, {6.0f}}}, {2, 3, w}, true);
  }
}

TEST(ElementwiseChain, OperandsOnTheLeftBroadcastsAndVectors) {
  // x * sigmoid(3 - x): the scalar on the left of Sub, x on the left of Mul.
  check({ins(OpKind::Sub, {1, 0}), ins(OpKind::Sigmoid, {2}), ins(OpKind::Mul, {0, 3})},
        {{{4, 37}, values(148, 2)}, {{1}, {3.0f}}}, {4, 37}, true);
  // A batch norm's scale and shift per channel, then max with a second full input, then min with it first.
  check({ins(OpKind::Mul, {0, 1}), ins(OpKind::Add, {3, 2}), ins(OpKind::Max, {4, 0}), ins(OpKind::Min, {0, 5}),
         ins(OpKind::Relu, {6})},
        {{{2, 8, 5, 19}, values(1520, 3)}, {{8, 1, 1}, values(8, 4)}, {{1, 8, 1, 1}, values(8, 5)}}, {2, 8, 5, 19},
        true);
  // The first step on two full inputs, the second operand first.
  check({ins(OpKind::Sub, {1, 0}), ins(OpKind::Div, {2, 1})}, {{{3, 50}, values(150, 6)}, {{3, 50}, values(150, 7)}},
        {3, 50}, true);
}

TEST(ElementwiseChain, EveryUnaryStep) {
  const OpKind kinds[] = {OpKind::Abs,  OpKind::Sqrt,    OpKind::Log,  OpKind::Neg,        OpKind::Exp,
                          OpKind::Tanh, OpKind::Erf,     OpKind::Gelu, OpKind::Silu,       OpKind::Round,
                          OpKind::Relu, OpKind::Sigmoid, OpKind::Clip, OpKind::Reciprocal, OpKind::Rsqrt,
                          OpKind::HardSwish};
  std::vector<InstrSpec> p;
  for (OpKind k : kinds) {
    p.push_back(ins(k, {int32_t(p.size())}, -2, 2.5));
    // Each unary step alone too.
    SCOPED_TRACE(std::string(op_name(k)));
    check({ins(k, {0}, -2, 2.5)}, {{{3, 41}, values(123, 8)}}, {3, 41}, true);
  }
  check(p, {{{3, 41}, values(123, 9)}}, {3, 41}, true);
}

TEST(ElementwiseChain, ProgramsThatAreNotChainsKeepTheBlockPath) {
  const std::vector<Input> two = {{{2, 20}, values(40, 10)}, {{2, 20}, values(40, 11)}};
  check({ins(OpKind::Add, {0, 1}), ins(OpKind::Mul, {2, 2})}, two, {2, 20}, false);  // a result read twice
  check({ins(OpKind::Add, {0, 1}), ins(OpKind::Mul, {0, 1}), ins(OpKind::Sub, {2, 3})}, two, {2, 20},
        false);  // two results live at once
  check({ins(OpKind::Add, {1, 2})}, {{{2, 20}, values(40, 12)}, {{1}, {1.0f}}, {{1}, {2.0f}}}, {2, 20},
        false);  // no full input to start from
}

}  // namespace
}  // namespace rlx::test
