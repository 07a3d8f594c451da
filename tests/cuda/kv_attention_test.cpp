// kv_attention on CUDA against the CPU oracle, over the launch forms the kernel picks from
// the shapes (llm.cu): a decode step's few queries with 32 warps each (over short and long
// caches) and a prompt's many queries with 8 warps each. The caches are f16 and every sum
// is in f32 on both sides, in different orders: the bound below is the f32 rounding of
// those sums, derived per case, not a fitted number.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "cuda_test_util.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using cuda_test::randoms;

constexpr int64_t Hq = 32, Hkv = 4, D = 64;

TypedTensor f16(std::vector<int64_t> dims, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const std::vector<float> v = randoms(size_t(n), seed);
  TypedTensor t{DType::F16, std::move(dims), std::vector<uint8_t>(size_t(n) * 2)};
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = f32_to_f16(v[i]);
    std::memcpy(t.bytes.data() + 2 * i, &h, 2);
  }
  return t;
}

std::vector<float> floats(const TypedTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// q [1, Hq, T, D] over a cache of C rows holding `past` and T new rows.
void check(int64_t C, int64_t T, int64_t past) {
  Graph g("kv_c" + std::to_string(C) + "_t" + std::to_string(T));
  Value q = g.input("q", Shape({1, Hq, T, D}, DType::F32));
  Value kc = g.input("kc", Shape({1, Hkv, C, D}, DType::F16)), vc = g.input("vc", Shape({1, Hkv, C, D}, DType::F16));
  Value kn = g.input("kn", Shape({1, Hkv, T, D}, DType::F16)), vn = g.input("vn", Shape({1, Hkv, T, D}, DType::F16));
  Value p = g.input("past", Shape({1}, DType::I64));
  g.set_outputs({g.kv_attention(q, kc, vc, kn, vn, p)});
  TypedTensor pt{DType::I64, {1}, std::vector<uint8_t>(8)};
  std::memcpy(pt.bytes.data(), &past, 8);
  // Scores of a few units (q up to 4, keys up to 1, scaled by 1/8 over 64 dims): the
  // softmax is spread over many rows, so every warp of the split holds weight.
  const std::map<std::string, TypedTensor> in{{"q", cuda_test::random_f32({1, Hq, T, D}, 1, 4.0f)},
                                              {"kc", f16({1, Hkv, C, D}, 2)},
                                              {"vc", f16({1, Hkv, C, D}, 3)},
                                              {"kn", f16({1, Hkv, T, D}, 4)},
                                              {"vn", f16({1, Hkv, T, D}, 5)},
                                              {"past", pt}};
  const std::vector<float> want = floats(Session(Device::Cpu).compile(g).run_typed(in)[0]);
  const std::vector<float> got = floats(Session(Device::Cuda).compile(g).run_typed(in)[0]);
  ASSERT_EQ(got.size(), want.size());
  // Each output is sum_j p_j v_j / sum_j p_j over n <= past + T rows with |v| <= 1: f32 sums
  // of n terms in two different orders differ by at most about 2 n u (u = 2^-24) relative
  // to the sum of |terms| <= max |v| = 1, the exps by a few ulp each (relative, so bounded
  // by the same sum); 4 (n + 64) u covers both, the 64 for the merge of the warps.
  const double tol = 4.0 * double(past + T + 64) * std::ldexp(1.0, -24);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << g.name() << " at " << i;
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
  }
  EXPECT_LE(worst, tol) << g.name() << " past " << past;
}

TEST(CudaKvAttention, DecodeStepsShortAndLongCachesAndPromptsMatchTheCpu) {
  REQUIRE_CUDA();
  check(256, 1, 0);       // the first token: its own row only
  check(256, 1, 200);     // 32 warps per query
  check(2048, 1, 1999);   // a long cache: 2,000 rows over the 32 warps
  check(2048, 1, 100);    // a long cache mostly empty
  check(1024, 64, 900);   // a prompt's 2,048 queries: 8 warps each
}

}  // namespace
}  // namespace rlx
