// The CUDA prefill attention kernel (attention.cu) against the CPU oracle: masks of every
// broadcast form (including rows hidden entirely: zeros), causal with Sk > Sq, grouped query
// heads, Dv != D, several key tiles and query blocks, f32 and the f16 / bf16 policies (head
// dims that are multiples of 16 take a tensor-core kernel there: the one-pass one up to 128 keys,
// the streaming one past that; the others the CUDA-core one); the
// node runs natively (not decomposed), and the exported chain is fused into it on CUDA too.
// Skips without a usable CUDA device.
//
// Tolerance, per output element (inputs in [-1, 1], so |q_i k_i| <= 1 and |v| <= 1). Both
// sides compute in f32 in their own orders: a score differs by at most 2 * D * 2^-24 * D *
// scale (two dot products of D terms, each within D * 2^-24 of its sum of |terms| <= D); a
// probability's relative error is then twice that (the score and the row max), plus the exp
// functions' few ulps (CUDA's fast exp: 2 + 1.2 |x| ulps of e^x, at most 2^-22 absolute for
// the x <= 0 here) and the normalizing sum's Sk * 2^-24; the output, a convex combination of
// values |v| <= 1, moves by at most the sum of those. Twice that (first-order bound) is
// allowed. A low policy rounds the inputs the same way on both sides and the output once on
// each: one more unit u of the low type at |y| <= 1 (2^-11 for f16, 2^-8 for bf16); the
// tensor-core kernel also rounds the probabilities to the low type before P V and normalizes
// by the sum of the rounded ones, which moves a convex combination of |v| <= 1 by at most 2u.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>

#include "cuda_test_util.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using cuda_test::randoms;

// The backend claims small heads-first attentions only when asked (lower.cpp): these tests ask.
struct ForceClaim {
  ForceClaim() { setenv("RLX_CUDA_ATTENTION", "1", 1); }
  ~ForceClaim() { unsetenv("RLX_CUDA_ATTENTION"); }
};

struct Case {
  int64_t b, hq, hkv, sq, sk, d, dv;
  bool causal = false;
  double scale = 0;
  std::vector<int64_t> mask;  // empty: none
  float hidden = 0;           // share of mask entries set to -inf
  bool bshd = false;          // q, k, v and y [B,S,H,D] (the node's bshd: rows H * D apart)
};

double bound(const Case& c, Precision p) {
  const double u = std::ldexp(1.0, -24);
  const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(double(c.d));
  const double ds = 2 * double(c.d) * u * double(c.d) * scale;
  const double f32 = 2 * (2 * ds + std::ldexp(1.0, -22) + double(c.sk) * u);
  const double low = p == Precision::F16 ? std::ldexp(1.0, -11) : p == Precision::BF16 ? std::ldexp(1.0, -8) : 0.0;
  return f32 + 3 * low;
}

void check(const Case& c, Precision p) {
  SCOPED_TRACE(::testing::Message() << "B" << c.b << " Hq" << c.hq << " Hkv" << c.hkv << " Sq" << c.sq << " Sk" << c.sk
                                    << " D" << c.d << " Dv" << c.dv << " causal=" << c.causal << " mask "
                                    << c.mask.size() << "d precision " << int(p) << (c.bshd ? " bshd" : ""));
  Graph g("attention");
  auto dims = [&](int64_t h, int64_t s, int64_t d) {
    return c.bshd ? std::vector<int64_t>{c.b, s, h, d} : std::vector<int64_t>{c.b, h, s, d};
  };
  std::vector<Value> ins{g.input("q", Shape(dims(c.hq, c.sq, c.d), DType::F32)),
                         g.input("k", Shape(dims(c.hkv, c.sk, c.d), DType::F32)),
                         g.input("v", Shape(dims(c.hkv, c.sk, c.dv), DType::F32))};
  if (!c.mask.empty()) ins.push_back(g.input("m", Shape(c.mask, DType::F32)));
  AttentionAttrs a;
  a.causal = c.causal;
  a.scale = c.scale;
  a.bshd = c.bshd;
  g.set_outputs({g.add1(OpKind::Attention, ins, a)}, {"y"});
  std::map<std::string, std::vector<float>> in{{"q", randoms(size_t(c.b * c.hq * c.sq * c.d), 1)},
                                               {"k", randoms(size_t(c.b * c.hkv * c.sk * c.d), 2)},
                                               {"v", randoms(size_t(c.b * c.hkv * c.sk * c.dv), 3)}};
  if (!c.mask.empty()) {
    int64_t n = 1;
    for (int64_t x : c.mask) n *= x;
    std::vector<float> mv = randoms(size_t(n), 4), sel = randoms(size_t(n), 5);
    for (size_t i = 0; i < mv.size(); ++i)
      if (sel[i] * 0.5f + 0.5f < c.hidden) mv[i] = -std::numeric_limits<float>::infinity();
    in["m"] = mv;
  }
  CompileOptions o;
  o.precision = p;
  CompiledGraph gpu = Session(Device::Cuda, o).compile(g), cpu = Session(Device::Cpu, o).compile(g);
  EXPECT_NE(gpu.report().dispatch.find("attention: native 1\n"), std::string::npos) << gpu.report().dispatch;
  const auto got = gpu.run(in)[0], want = cpu.run(in)[0];
  ASSERT_EQ(got.size(), want.size());
  const double tol = bound(c, p);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << "y[" << i << "]: cuda " << got[i] << ", cpu " << want[i] << ", bound " << tol;
  EXPECT_EQ(got, gpu.run(in)[0]) << "two runs differ";
}

TEST(CudaAttention, MatchesCpuAcrossShapesMasksAndPolicies) {
  REQUIRE_CUDA();
  ForceClaim force;
  const std::vector<Case> cases = {
      {1, 2, 2, 5, 5, 8, 8},
      {1, 2, 2, 70, 200, 32, 48, true, 0, {1, 2, 70, 200}, 0.3f},  // tensor cores: partial tiles, causal, 4-d mask
      {1, 2, 2, 9, 0, 8, 8},                                   // no keys: zeros
      {8, 12, 12, 128, 128, 64, 64, false, 0, {8, 1, 1, 128}},  // BERT-shaped, padding mask
      {2, 3, 3, 37, 70, 33, 12, false, 0.3},                   // odd dims, three key tiles
      {1, 4, 4, 37, 37, 16, 16, true},                         // causal, three query blocks
      {1, 2, 2, 7, 300, 128, 128, true},                       // Sk > Sq, widest head
      {2, 8, 2, 50, 50, 64, 40, false, 0, {50, 50}},           // grouped heads, 2-d mask
      {1, 4, 1, 1, 513, 128, 96},                              // one query
      {1, 2, 2, 8, 40, 8, 8, false, 0, {1, 2, 8, 40}, 0.9f},   // rows hidden entirely
      // heads in place (bshd): BERT-shaped, partial tiles with grouped heads, odd dims (CUDA cores)
      {8, 12, 12, 128, 128, 64, 64, false, 0, {8, 1, 1, 128}, 0, true},
      {1, 8, 2, 70, 200, 32, 48, true, 0, {1, 8, 70, 200}, 0.3f, true},
      {2, 3, 3, 37, 70, 33, 12, false, 0.3, {}, 0, true},
      // up to 128 keys on tensor cores (the one-pass kernel): rows hidden entirely, grouped heads
      // with a partial last fragment of keys, one query at the widest head
      {1, 2, 2, 24, 40, 16, 16, false, 0, {1, 2, 24, 40}, 0.9f},
      {1, 8, 2, 70, 100, 32, 48, false, 0, {1, 1, 70, 100}, 0.3f, true},
      {1, 4, 1, 1, 100, 128, 96},
  };
  for (Precision p : {Precision::F32, Precision::F16, Precision::BF16})
    for (const Case& c : cases) check(c, p);
}

TEST(CudaAttention, TheExportedChainIsFusedAndClaimed) {
  REQUIRE_CUDA();
  ForceClaim force;
  Graph g("chain");
  Value q = g.input("q", Shape({2, 4, 16, 32}, DType::F32));
  Value keys = g.input("keys", Shape({2, 16, 4, 32}, DType::F32));
  Value v = g.input("v", Shape({2, 4, 16, 32}, DType::F32));
  Value s = g.div(g.matmul(q, g.transpose(keys, {0, 2, 3, 1})), g.constant_f32({}, {std::sqrt(32.0f)}));
  g.set_outputs({g.matmul(g.softmax(s, -1), v)}, {"y"});
  CompiledGraph gpu = Session(Device::Cuda).compile(g), cpu = Session(Device::Cpu).compile(g);
  EXPECT_NE(gpu.report().fusion.find("= attention of [transpose"), std::string::npos) << gpu.report().fusion;
  const std::map<std::string, std::vector<float>> in{
      {"q", randoms(2 * 4 * 16 * 32, 7)}, {"keys", randoms(2 * 4 * 16 * 32, 8)}, {"v", randoms(2 * 4 * 16 * 32, 9)}};
  const auto got = gpu.run(in)[0], want = cpu.run(in)[0];
  const double tol = bound({2, 4, 4, 16, 16, 32, 32}, Precision::F32);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << i;
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

TEST(CudaAttention, ClaimedByDefaultFromTheScoresSize) {
  // From 512 x 512 scores in f16 and bf16, from 2048 x 2048 in f32 (kernels.h); the exported
  // chain is fused under a low policy when the low attention would be claimed.
  REQUIRE_CUDA();
  unsetenv("RLX_CUDA_ATTENTION");
  struct Probe {
    int64_t s;
    Precision p;
    bool claimed;
  };
  for (const Probe& c : {Probe{128, Precision::F16, false}, Probe{512, Precision::F16, true},
                         Probe{512, Precision::BF16, true}, Probe{512, Precision::F32, false},
                         Probe{2048, Precision::F32, true}}) {
    Graph g("attention");
    Value q = g.input("q", Shape({1, 2, c.s, 64}, DType::F32));
    g.set_outputs({g.attention(q, q, q, {}, true)}, {"y"});
    CompileOptions o;
    o.precision = c.p;
    const std::string dispatch = Session(Device::Cuda, o).compile(g).report().dispatch;
    EXPECT_EQ(dispatch.find("attention: native 1\n") != std::string::npos, c.claimed)
        << c.s << " " << int(c.p) << "\n" << dispatch;
    Graph chain("chain");
    Value x = chain.input("x", Shape({1, 2, c.s, 64}, DType::F32));
    chain.set_outputs({chain.matmul(chain.softmax(chain.matmul(x, chain.transpose(x, {0, 1, 3, 2})), -1), x)}, {"y"});
    const std::string fusion = Session(Device::Cuda, o).compile(chain).report().fusion;
    EXPECT_EQ(fusion.find("= attention of") != std::string::npos, c.claimed) << c.s << " " << int(c.p) << "\n" << fusion;
  }
}

TEST(CudaAttention, HeadsInPlaceClaimedAtAnySizeInHalfPrecision) {
  // The encoder chain (heads split from [B,S,H,D] and merged back) at 128 tokens: one
  // attention{bshd} under f16 / bf16 (its alternative also transposes q, k, v and y), and no
  // attention at all in f32 (the CUDA-core kernel loses there to the products).
  REQUIRE_CUDA();
  unsetenv("RLX_CUDA_ATTENTION");
  for (Precision p : {Precision::F16, Precision::BF16, Precision::F32}) {
    const bool low = p != Precision::F32;
    Graph g("encoder");
    Value x = g.input("x", Shape({2, 128, 4, 64}, DType::F32));
    const std::vector<int64_t> swap{0, 2, 1, 3};
    Value h = g.transpose(x, swap);
    Value s = g.matmul(h, g.transpose(x, {0, 2, 3, 1}));
    g.set_outputs({g.transpose(g.matmul(g.softmax(s, -1), g.transpose(x, swap)), swap)}, {"y"});
    CompileOptions o;
    o.precision = p;
    CompiledGraph gpu = Session(Device::Cuda, o).compile(g);
    const std::string& fusion = gpu.report().fusion;
    EXPECT_EQ(fusion.find("heads in place (bshd)") != std::string::npos, low) << int(p) << "\n" << fusion;
    EXPECT_EQ(gpu.report().dispatch.find("attention: native 1\n") != std::string::npos, low) << gpu.report().dispatch;
    if (!low) continue;
    const std::map<std::string, std::vector<float>> in{{"x", randoms(2 * 128 * 4 * 64, 11)}};
    const auto got = gpu.run(in)[0], want = Session(Device::Cpu, o).compile(g).run(in)[0];
    ASSERT_EQ(got.size(), want.size());
    const double tol = bound({2, 4, 4, 128, 128, 64, 64, false, 1.0}, p);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(double(got[i]) - want[i]) <= tol) && bad++ < 5)
        ADD_FAILURE() << "y[" << i << "]: cuda " << got[i] << ", cpu " << want[i] << ", bound " << tol;
  }
}

}  // namespace
}  // namespace rlx
