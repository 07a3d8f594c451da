// kv_attention against a double-precision reference: cache rows [0, past) plus the new rows
// up to each query, GQA, f32 and f16 caches, batch with different past lengths, 1 vs 2
// threads bit-identical, and past outside the cache refused.
// Tolerance per output (derived): scores carry the f32 dot error
// ds_j <= 2 * D * u * scale * sum_e |q_e k_je| (u = 2^-24); the softmax weights then move by
// at most 2 * max_j ds_j relatively, and summing n weighted rows adds (n + 4) * u; all times
// max |v| (the output is a convex combination of value rows).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "harness.h"

namespace rlx {
namespace {

void check(DType kv, int64_t B, int64_t Hq, int64_t Hkv, int64_t T, int64_t C, std::vector<int64_t> past) {
  const int64_t D = 16;
  std::mt19937 rng(uint32_t(B * 100 + T * 10 + C));
  std::normal_distribution<float> nd(0.f, 1.f);
  auto tensor = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n), 0.0f);
    for (float& x : v) x = nd(rng);
    if (kv == DType::F16)  // the values an f16 cache can hold
      for (float& x : v) x = f16_to_f32(f32_to_f16(x));
    return v;
  };
  std::vector<float> q = tensor(B * Hq * T * D), kc = tensor(B * Hkv * C * D), vc = tensor(B * Hkv * C * D),
                     kn = tensor(B * Hkv * T * D), vn = tensor(B * Hkv * T * D);
  auto bytes = [&](const std::vector<float>& v) {
    if (kv == DType::F32) return test::to_bytes(v);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]);
    return test::to_bytes(h);
  };
  Graph g;
  Value qv = g.input("q", Shape({B, Hq, T, D}, DType::F32));
  Value a = g.input("kc", Shape({B, Hkv, C, D}, kv)), b = g.input("vc", Shape({B, Hkv, C, D}, kv));
  Value c = g.input("kn", Shape({B, Hkv, T, D}, kv)), d = g.input("vn", Shape({B, Hkv, T, D}, kv));
  Value p = g.input("past", Shape({B}, DType::I64));
  Value y = g.kv_attention(qv, a, b, c, d, p);
  std::vector<std::vector<uint8_t>> in{test::to_bytes(q), bytes(kc), bytes(vc), bytes(kn), bytes(vn), test::to_bytes(past)};
  auto o1 = test::run_kernel(g, y.node, in, 1), o2 = test::run_kernel(g, y.node, in, 2);
  EXPECT_EQ(o1[0], o2[0]);
  std::vector<float> got = test::from_bytes<float>(o1[0]);
  const double u = std::ldexp(1.0, -24), scale = 1.0 / std::sqrt(double(D));
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t hk = h / (Hq / Hkv), n = past[size_t(bi)] + t + 1;
        const float* qr = &q[size_t(((bi * Hq + h) * T + t) * D)];
        auto krow = [&](int64_t j) {
          return j < past[size_t(bi)] ? &kc[size_t(((bi * Hkv + hk) * C + j) * D)]
                                      : &kn[size_t(((bi * Hkv + hk) * T + (j - past[size_t(bi)])) * D)];
        };
        auto vrow = [&](int64_t j) {
          return j < past[size_t(bi)] ? &vc[size_t(((bi * Hkv + hk) * C + j) * D)]
                                      : &vn[size_t(((bi * Hkv + hk) * T + (j - past[size_t(bi)])) * D)];
        };
        std::vector<double> s(static_cast<size_t>(n), 0.0);
        double mx = -INFINITY, ds = 0, vmax = 0;
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0, mag = 0;
          for (int64_t e = 0; e < D; ++e) {
            acc += double(qr[e]) * krow(j)[e];
            mag += std::fabs(double(qr[e]) * krow(j)[e]);
          }
          s[size_t(j)] = acc * scale;
          ds = std::max(ds, 2.0 * D * u * scale * mag);
          mx = std::max(mx, s[size_t(j)]);
          for (int64_t e = 0; e < D; ++e) vmax = std::max(vmax, double(std::fabs(vrow(j)[e])));
        }
        double sum = 0;
        for (double& v : s) sum += v = std::exp(v - mx);
        const double tol = vmax * (2 * ds + double(n + 4) * u);
        for (int64_t e = 0; e < D; ++e) {
          double ref = 0;
          for (int64_t j = 0; j < n; ++j) ref += s[size_t(j)] / sum * vrow(j)[e];
          ASSERT_NEAR(got[size_t(((bi * Hq + h) * T + t) * D + e)], ref, tol) << "b " << bi << " h " << h << " t " << t;
        }
      }
  // A past beyond the cache is refused with the offending value.
  past[0] = C + 1;
  in[5] = test::to_bytes(past);
  EXPECT_THROW(test::run_kernel(g, y.node, in, 1), Error);
}

TEST(KvAttention, DecodeF32) { check(DType::F32, 1, 4, 2, 1, 32, {17}); }
TEST(KvAttention, DecodeF16) { check(DType::F16, 1, 4, 2, 1, 32, {32}); }
TEST(KvAttention, PrefillEmptyCacheF16) { check(DType::F16, 1, 3, 1, 7, 8, {0}); }
TEST(KvAttention, BatchWithRaggedPast) { check(DType::F32, 3, 2, 2, 2, 16, {0, 5, 14}); }

TEST(KvAttention, ShapeRules) {
  Graph g;
  Value q = g.input("q", Shape({1, 4, 1, 16}, DType::F32));
  Value kc = g.input("kc", Shape({1, 3, 8, 16}, DType::F16));
  Value kn = g.input("kn", Shape({1, 3, 1, 16}, DType::F16));
  Value p = g.input("p", Shape({1}, DType::I64));
  EXPECT_THROW(g.kv_attention(q, kc, kc, kn, kn, p), Error);  // 4 q heads over 3 kv heads
  Value kc2 = g.input("kc2", Shape({1, 2, 8, 16}, DType::F16));
  Value kn32 = g.input("kn32", Shape({1, 2, 1, 16}, DType::F32));
  EXPECT_THROW(g.kv_attention(q, kc2, kc2, kn32, kn32, p), Error);  // mixed cache types
  Value kn2 = g.input("kn2", Shape({1, 2, 1, 16}, DType::F16));
  EXPECT_NO_THROW(g.kv_attention(q, kc2, kc2, kn2, kn2, p));
}

}  // namespace
}  // namespace rlx
