// kv_attention on CUDA against the CPU oracle, over the launch forms the kernels pick from
// the shapes (kv_attention.cu): a decode step's few queries by a cluster per KV head (short
// and long caches, head dims and group sizes) and a prompt's many queries by a block each. The caches are f16 and every sum
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

struct Case {
  int64_t hq = 32, hkv = 4, d = 64;  // TinyLlama's heads unless stated
  int64_t c = 0, t = 0;
  std::vector<int64_t> past;  // per sequence: the batch is past.size()
};

// Runs kv_attention on both devices; q [B, Hq, T, D] over caches of C rows holding past[b]
// rows and T new rows. Returns the CUDA executable's error message ("" when it ran).
std::string check(const Case& k) {
  const int64_t B = int64_t(k.past.size()), Hq = k.hq, Hkv = k.hkv, D = k.d, C = k.c, T = k.t;
  Graph g("kv_h" + std::to_string(Hq) + "_" + std::to_string(Hkv) + "_d" + std::to_string(D) + "_c" +
          std::to_string(C) + "_t" + std::to_string(T) + "_b" + std::to_string(B));
  Value q = g.input("q", Shape({B, Hq, T, D}, DType::F32));
  Value kc = g.input("kc", Shape({B, Hkv, C, D}, DType::F16)), vc = g.input("vc", Shape({B, Hkv, C, D}, DType::F16));
  Value kn = g.input("kn", Shape({B, Hkv, T, D}, DType::F16)), vn = g.input("vn", Shape({B, Hkv, T, D}, DType::F16));
  Value p = g.input("past", Shape({B}, DType::I64));
  g.set_outputs({g.kv_attention(q, kc, vc, kn, vn, p)});
  TypedTensor pt{DType::I64, {B}, std::vector<uint8_t>(size_t(B) * 8)};
  std::memcpy(pt.bytes.data(), k.past.data(), size_t(B) * 8);
  // Scores of a few units (q up to 4, keys up to 1, scaled by 1/sqrt(D)): the softmax is
  // spread over many rows, so every part of the split holds weight.
  const std::map<std::string, TypedTensor> in{{"q", cuda_test::random_f32({B, Hq, T, D}, 1, 4.0f)},
                                              {"kc", f16({B, Hkv, C, D}, 2)},
                                              {"vc", f16({B, Hkv, C, D}, 3)},
                                              {"kn", f16({B, Hkv, T, D}, 4)},
                                              {"vn", f16({B, Hkv, T, D}, 5)},
                                              {"past", pt}};
  CompiledGraph cuda = Session(Device::Cuda).compile(g);
  for (int64_t pb : k.past)
    if (pb < 0 || pb > C) {
      std::string msg;
      try {
        cuda.run_typed(in);
        ADD_FAILURE() << g.name() << ": past " << pb << " out of [0, " << C << "] ran";
      } catch (const Error& e) {
        msg = e.what();
      }
      std::map<std::string, TypedTensor> ok = in;  // every past in range: the same executable runs
      std::memset(ok.at("past").bytes.data(), 0, size_t(B) * 8);
      EXPECT_NO_THROW(cuda.run_typed(ok)) << g.name();
      return msg;
    }
  const std::vector<float> want = floats(Session(Device::Cpu).compile(g).run_typed(in)[0]);
  const std::vector<float> got = floats(cuda.run_typed(in)[0]);
  EXPECT_EQ(got, floats(cuda.run_typed(in)[0])) << g.name() << ": a second run gave other bits";
  EXPECT_EQ(got.size(), want.size());
  // Each output is sum_j p_j v_j / sum_j p_j over n <= past + T rows with |v| <= 1: f32 sums
  // of n terms in two different orders differ by at most about 2 n u (u = 2^-24) relative
  // to the sum of |terms| <= max |v| = 1, the exps by a few ulp each (relative, so bounded
  // by the same sum); 4 (n + 64) u covers both, the 64 for the merges of the split's parts.
  for (int64_t b = 0; b < B; ++b) {
    const double tol = 4.0 * double(k.past[size_t(b)] + T + 64) * std::ldexp(1.0, -24);
    double worst = 0;
    for (size_t i = size_t(b * Hq * T * D); i < size_t((b + 1) * Hq * T * D) && i < got.size(); ++i) {
      EXPECT_TRUE(std::isfinite(got[i])) << g.name() << " at " << i;
      worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
    }
    EXPECT_LE(worst, tol) << g.name() << " sequence " << b << " past " << k.past[size_t(b)];
  }
  return "";
}

TEST(CudaKvAttention, DecodeStepsShortAndLongCachesAndPromptsMatchTheCpu) {
  REQUIRE_CUDA();
  check({.c = 256, .t = 1, .past = {0}});       // the first token: its own row only
  check({.c = 256, .t = 1, .past = {200}});     // a decode step: a cluster per KV head
  check({.c = 2048, .t = 1, .past = {1999}});   // a long cache
  check({.c = 2048, .t = 1, .past = {100}});    // a long cache mostly empty
  check({.c = 1024, .t = 64, .past = {900}});   // a prompt's 2,048 queries: a block each
  check({.c = 512, .t = 4, .past = {300}});     // a few queries, each with its causal end
  check({.c = 512, .t = 1, .past = {17, 480, 0}});  // a batch, each sequence its own length
}

// The decode kernel's forms: head dims of 32 to 256 (4 to 32 lanes per row; 40 and 96 leave
// lanes of the row unused), groups of 1 to 16 query heads per KV head (blocks take pairs: a
// group of 3 leaves a head of its second pair unused).
TEST(CudaKvAttention, HeadDimsAndGroupSizesMatchTheCpu) {
  REQUIRE_CUDA();
  check({.hq = 8, .hkv = 8, .d = 128, .c = 512, .t = 1, .past = {300}});
  check({.hq = 12, .hkv = 4, .d = 32, .c = 512, .t = 1, .past = {411}});
  check({.hq = 32, .hkv = 2, .d = 64, .c = 1024, .t = 1, .past = {1000}});
  check({.hq = 8, .hkv = 2, .d = 256, .c = 512, .t = 2, .past = {333}});
  check({.hq = 6, .hkv = 2, .d = 96, .c = 256, .t = 1, .past = {255}});
  check({.hq = 4, .hkv = 1, .d = 40, .c = 128, .t = 1, .past = {77}});
  check({.hq = 4, .hkv = 2, .d = 36, .c = 128, .t = 1, .past = {100}});  // no whole 16-byte chunks: by query
}

// A past outside [0, C] is reported by the run, naming the node; the executable stays usable.
TEST(CudaKvAttention, PastOutOfRangeIsAnErrorAndTheExecutableRunsOn) {
  REQUIRE_CUDA();
  const std::string msg = check({.c = 256, .t = 1, .past = {3, 257}});
  EXPECT_NE(msg.find("kv_attention"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
