// conv_integer (ONNX ConvInteger) against direct integer loops: u8 / i8 inputs and
// weights in every combination, scalar and per-channel weight zero points, strides,
// asymmetric pads (which read x_zp), dilation, groups, K not a multiple of 4, rows and
// columns off the kernels' tiles, on every ISA level here (VNNI, AVX2, scalar) and at 1
// and 2 threads. Integer results compare exactly. Also: a compiled graph with constant
// weights (packed once) equals the op's f64 decomposition.
#include <gtest/gtest.h>

#include <vector>

#include "gemm_test_util.h"
#include "harness.h"
#include "opt/passes.h"
#include "opt/pipeline.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

struct IntConvCase {
  int64_t n, c, h, w, cout, kh, kw;
  std::vector<int64_t> strides{1, 1}, pads{0, 0, 0, 0}, dil{1, 1};
  int64_t group = 1;
  DType xt = DType::U8, wt = DType::I8;
  bool per_channel = false;
};

// Bytes of deterministic values of an 8-bit type covering its whole range.
std::vector<uint8_t> int8_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n);
  uint64_t s = 0x2545F4914F6CDD1Dull ^ seed;
  for (auto& v : b) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = uint8_t(s >> 56);
  }
  return b;
}

int64_t value(uint8_t b, DType t) { return t == DType::I8 ? int64_t(int8_t(b)) : int64_t(b); }

std::vector<int32_t> reference(const IntConvCase& k, const std::vector<uint8_t>& x, const std::vector<uint8_t>& w,
                               uint8_t xz, const std::vector<uint8_t>& wz, int64_t oh, int64_t ow) {
  const int64_t cg = k.c / k.group, mg = k.cout / k.group;
  std::vector<int32_t> out;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t co = 0; co < k.cout; ++co)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t s = 0;
          const int64_t wzv = value(wz[size_t(k.per_channel ? co : 0)], k.wt);
          for (int64_t cl = 0; cl < cg; ++cl)
            for (int64_t ky = 0; ky < k.kh; ++ky)
              for (int64_t kx = 0; kx < k.kw; ++kx) {
                const int64_t iy = oy * k.strides[0] - k.pads[0] + ky * k.dil[0];
                const int64_t ix = ox * k.strides[1] - k.pads[1] + kx * k.dil[1];
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;  // (x_zp - x_zp) * w
                const int64_t ci = (co / mg) * cg + cl;
                s += (value(x[size_t(((n * k.c + ci) * k.h + iy) * k.w + ix)], k.xt) - value(xz, k.xt)) *
                     (value(w[size_t(((co * cg + cl) * k.kh + ky) * k.kw + kx)], k.wt) - wzv);
              }
          out.push_back(int32_t(s));
        }
  return out;
}

Value conv_integer(Graph& g, const IntConvCase& k, Value x, Value w, Value xz, Value wz) {
  ConvAttrs a;
  a.strides = k.strides;
  a.pads = k.pads;
  a.dilations = k.dil;
  a.group = k.group;
  return g.add(OpKind::ConvInteger, {x, w, xz, wz}, a, "conv")[0];
}

void check(const IntConvCase& k) {
  SCOPED_TRACE(::testing::Message() << "x=[" << k.n << "," << k.c << "," << k.h << "," << k.w << "] cout=" << k.cout
                                    << " k=" << k.kh << "x" << k.kw << " g=" << k.group << " " << dtype_name(k.xt)
                                    << "x" << dtype_name(k.wt) << (k.per_channel ? " per-channel" : ""));
  const int64_t nwz = k.per_channel ? k.cout : 1;
  Graph g;
  Value x = g.input("x", Shape({k.n, k.c, k.h, k.w}, k.xt));
  Value w = g.input("w", Shape({k.cout, k.c / k.group, k.kh, k.kw}, k.wt));
  Value xz = g.input("xz", Shape(std::vector<int64_t>{}, k.xt));
  Value wz = g.input("wz", Shape(k.per_channel ? std::vector<int64_t>{nwz} : std::vector<int64_t>{}, k.wt));
  Value y = conv_integer(g, k, x, w, xz, wz);
  const auto od = g.type(y).static_dims();
  ASSERT_EQ(g.type(y).dtype(), DType::I32);
  std::vector<std::vector<uint8_t>> in{int8_bytes(size_t(k.n * k.c * k.h * k.w), 1),
                                       int8_bytes(size_t(k.cout * (k.c / k.group) * k.kh * k.kw), 2),
                                       int8_bytes(1, 3), int8_bytes(size_t(nwz), 4)};
  const auto want = reference(k, in[0], in[1], in[2][0], in[3], od[2], od[3]);
  for (const char* isa : isa_levels_here()) {
    IsaOverride o(isa);
    SCOPED_TRACE(std::string("RLX_ISA=") + isa);
    EXPECT_EQ(from_bytes<int32_t>(run_kernel(g, y.node, in, 1)[0]), want);
    EXPECT_EQ(from_bytes<int32_t>(run_kernel(g, y.node, in, 2)[0]), want) << "2 threads";
  }
}

TEST(ConvInteger, TypesZeroPointsAndWindows) {
  for (DType xt : {DType::U8, DType::I8})
    for (DType wt : {DType::U8, DType::I8})
      for (bool pc : {false, true}) {
        IntConvCase k{1, 3, 9, 11, 5, 3, 3};
        k.xt = xt, k.wt = wt, k.per_channel = pc;
        k.pads = {1, 0, 2, 1};
        check(k);
      }
}

TEST(ConvInteger, StridesDilationGroupsAndTiles) {
  IntConvCase a{2, 4, 13, 10, 6, 3, 2};
  a.strides = {2, 1}, a.dil = {1, 2}, a.group = 2, a.pads = {0, 1, 1, 0};
  check(a);
  IntConvCase pointwise{1, 17, 7, 7, 9, 1, 1};  // K = 17: not a multiple of 4
  check(pointwise);
  IntConvCase many{1, 8, 21, 19, 20, 3, 3};  // 399 columns: two chunks, the second off the tile
  many.pads = {1, 1, 1, 1}, many.per_channel = true;
  check(many);
  IntConvCase depthwise{1, 6, 8, 8, 12, 3, 3};
  depthwise.group = 6, depthwise.xt = DType::I8, depthwise.wt = DType::U8;
  check(depthwise);
}

// Through the compile pipeline with constant weights and zero points (packed once at the
// first run, reused by the second and by a clone): equal to the decomposition that
// backends without the kernel run (an f64 conv of the shifted operands).
TEST(ConvInteger, CompiledWithConstantWeightsEqualsDecomposition) {
  IntConvCase k{1, 8, 12, 12, 16, 3, 3};
  k.pads = {1, 1, 1, 1}, k.per_channel = true, k.wt = DType::U8;
  Graph g;
  Value x = g.input("x", Shape({k.n, k.c, k.h, k.w}, k.xt));
  auto wb = int8_bytes(size_t(k.cout * k.c * 9), 7), wzb = int8_bytes(size_t(k.cout), 8);
  Value w = g.constant(Shape({k.cout, k.c, 3, 3}, k.wt), Blob(wb));
  Value xz = g.constant(Shape(std::vector<int64_t>{}, k.xt), Blob(std::vector<uint8_t>{131}));
  Value wz = g.constant(Shape({k.cout}, k.wt), Blob(wzb));
  g.set_outputs({conv_integer(g, k, x, w, xz, wz)}, {"y"});
  CompileOptions opts;
  opts.threads = 2;
  CompiledGraph cg = Session(Device::Cpu, opts).compile(g);
  const auto od = std::vector<int64_t>{k.n, k.cout, k.h, k.w};
  const auto want = reference(k, int8_bytes(size_t(k.n * k.c * k.h * k.w), 9), wb, 131, wzb, od[2], od[3]);
  for (int rep = 0; rep < 2; ++rep) {
    auto outs = cg.run_typed({{"x", TypedTensor{k.xt, {k.n, k.c, k.h, k.w}, int8_bytes(size_t(k.n * k.c * k.h * k.w), 9)}}});
    EXPECT_EQ(from_bytes<int32_t>(outs[0].bytes), want);
  }
  CompiledGraph copy = cg.clone();
  auto outs = copy.run_typed({{"x", TypedTensor{k.xt, {k.n, k.c, k.h, k.w}, int8_bytes(size_t(k.n * k.c * k.h * k.w), 9)}}});
  EXPECT_EQ(from_bytes<int32_t>(outs[0].bytes), want);
  // The decomposition (what legalize emits for a backend without conv_integer), run on CPU.
  opt::BackendClaims all_but{"fake", [](const Node& n, const std::vector<const Shape*>&) {
                               return n.kind != OpKind::ConvInteger;
                             }};
  Graph lowered = opt::legalize(g, all_but, nullptr);
  for (const Node& n : lowered.nodes()) ASSERT_NE(n.kind, OpKind::ConvInteger);
  auto d = Session(Device::Cpu, opts).compile(lowered).run_typed(
      {{"x", TypedTensor{k.xt, {k.n, k.c, k.h, k.w}, int8_bytes(size_t(k.n * k.c * k.h * k.w), 9)}}});
  EXPECT_EQ(from_bytes<int32_t>(d[0].bytes), want);
}

}  // namespace
}  // namespace rlx::test
