// qmatmul against a double-precision reference on the dequantized weights, for every block
// format with a dequantizer, on both paths (decode-sized GEMV, prefill-sized GEMM through
// the block-dequantizing B packer) and 1 vs 2 threads (bit-identical).
// Weights: the llama.cpp fixtures of tests/data/gguf/quants (real quantizer output plus
// random blocks), read as rows of 256 elements.
// Tolerances, per output y = sum_k x_k w_k, derived from the computation:
//   - float accumulation over K terms: |err| <= 2 * K * 2^-24 * sum_k |x_k w_k| (a standard
//     bound with slack 2 for the partial-sum order);
//   - Q8_0 / Q4_0 (decode GEMV, and the int8 prefill GEMM on VNNI) and Q4_1 / Q5_0 / Q5_1 /
//     Q4_K / Q5_K / Q6_K (always) quantize x per 32-block (step d = amax/127, rounding error <= d/2 per
//     element): |err| += sum_k |w_k| * d_block(k) / 2;
//   - formats with a min or an offset (Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K) apply the scale and
//     the min separately (w = a + m, a = d * sc * q): the rounding of each part is relative
//     to |a| + |m|, not |w|, so |err| += 4 * 2^-24 * sum_k |x_k| (|a_k| + |m_k|).
// Every ISA level this machine has runs (native, avx2, scalar: each has its own kernels).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "backends/cpu/kernels/qdot.h"
#include "gemm_test_util.h"
#include "harness.h"
#include "ir/quant/block_util.h"
#include "rlx/quant.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

std::vector<uint8_t> fixture(const std::string& name) {
  std::ifstream f(std::string(RLX_SOURCE_DIR) + "/tests/data/gguf/quants/" + name + ".blocks", std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void check_at(uint32_t format, int64_t m, bool repack, int64_t K, const char* isa) {
  SCOPED_TRACE(std::string("RLX_ISA=") + isa + " K=" + std::to_string(K));
  test::IsaOverride guard(isa);
  const quant::Format& f = quant::get(format);
  std::vector<uint8_t> w = fixture(f.name);
  ASSERT_FALSE(w.empty()) << "no fixture for " << f.name;
  // The fixture holds rows of 256 elements; rows of K = 256 r are made of r of them.
  const int64_t rb1 = quant::row_bytes(format, 256), rb = quant::row_bytes(format, K);
  const int64_t N = static_cast<int64_t>(w.size()) / rb1;
  std::vector<float> w1(static_cast<size_t>(N * 256));
  quant::dequantize(format, w.data(), w1.data(), N * 256);
  // The scale part a of weights w = a + m (Q4_1 / Q5_1 / Q4_K / Q5_K: the same blocks with
  // the min scale, bytes 2-3, zeroed; Q5_0: a = w + 16 d).
  const bool has_min = format == quant::kQ4_K || format == quant::kQ5_K || format == quant::kQ4_1 ||
                       format == quant::kQ5_1 || format == quant::kQ5_0;
  std::vector<float> a1;
  if (has_min) {
    a1.resize(w1.size());
    if (format == quant::kQ5_0) {
      for (int64_t e = 0; e < N * 256; ++e) {
        uint16_t h;
        std::memcpy(&h, w.data() + (e / 32) * f.block_bytes, 2);
        a1[size_t(e)] = w1[size_t(e)] + 16.0f * f16_to_f32(h);
      }
    } else {
      std::vector<uint8_t> z = w;
      for (size_t o = 0; o + f.block_bytes <= z.size(); o += size_t(f.block_bytes)) z[o + 2] = z[o + 3] = 0;
      quant::dequantize(format, z.data(), a1.data(), N * 256);
    }
  }
  // Fixtures include conversion edge cases (inf/NaN in f16/bf16 rows); keep finite rows.
  std::vector<int64_t> fin;
  for (int64_t j = 0; j < N; ++j) {
    bool finite = true;
    for (int64_t k = 0; k < 256; ++k) finite = finite && std::isfinite(w1[size_t(j * 256 + k)]) && std::fabs(w1[size_t(j * 256 + k)]) < 1e30f;
    if (finite) fin.push_back(j);
  }
  ASSERT_GE(fin.size(), 4u);
  const int64_t n = repack ? 32 : std::max<int64_t>(24, int64_t(fin.size()));
  const int64_t r = K / 256;
  std::vector<uint8_t> wf;
  std::vector<float> wd, wa;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t t = 0; t < r; ++t) {
      const int64_t src = fin[size_t((j * 7 + t * 3) % int64_t(fin.size()))];
      wf.insert(wf.end(), w.begin() + src * rb1, w.begin() + (src + 1) * rb1);
      wd.insert(wd.end(), w1.begin() + src * 256, w1.begin() + (src + 1) * 256);
      if (has_min) wa.insert(wa.end(), a1.begin() + src * 256, a1.begin() + (src + 1) * 256);
    }
  ASSERT_EQ(int64_t(wf.size()), n * rb);
  std::mt19937 rng(format * 31 + uint32_t(m));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * K));
  for (float& v : x) v = nd(rng);

  uint32_t run_format = format;
  if (repack) {  // the same weights in rlx's q4_0x16 panels
    std::vector<uint8_t> packed(wf.size());
    quant::repack_q4_0x16(wf.data(), packed.data(), n, K);
    wf = packed;
    run_format = quant::kQ4_0x16;
  }
  Graph g;
  Value xv = g.input("x", Shape({m, K}, DType::F32));
  Value wv = g.input("w", Shape({n, rb}, DType::U8));
  Value y = g.qmatmul(xv, wv, run_format, K);
  std::vector<std::vector<uint8_t>> out1;
  try {
    out1 = test::run_kernel(g, y.node, {test::to_bytes(x), wf}, 1);
  } catch (const Error& e) {
    if (repack && e.category() == ErrorCategory::Unsupported) GTEST_SKIP() << "no AVX-512 VNNI here: " << e.what();
    throw;
  }
  auto out2 = test::run_kernel(g, y.node, {test::to_bytes(x), wf}, 2);
  EXPECT_EQ(out1[0], out2[0]) << f.name << ": 1 and 2 threads differ";
  std::vector<float> got = test::from_bytes<float>(out1[0]);
  // Q8_0 / Q4_0 / Q6_K and the formats with mins quantize x to int8 blocks on every path (the
  // bound includes that error for any m); IQ4_NL / IQ4_XS on the int8 panel GEMM, which takes
  // them past 8 rows at the AVX2 and AVX-512 levels (the scalar table has no panel kernel;
  // their decode dequantizes one weight row to floats).
  const bool iq4 = format == quant::kIQ4_NL || format == quant::kIQ4_XS;
  const bool q8 = format == quant::kQ8_0 || format == quant::kQ4_0 || format == quant::kQ6_K || has_min ||
                  (iq4 && m > 8 && std::string(isa) != "scalar");
  for (int64_t i = 0; i < m; ++i)
    for (int64_t jj = 0; jj < n; ++jj) {
      const float* wr = wd.data() + jj * K;
      const float* xr = x.data() + i * K;
      double ref = 0, mag = 0, qerr = 0;
      for (int64_t k = 0; k < K; ++k) {
        ref += double(xr[k]) * wr[k];
        mag += std::fabs(double(xr[k]) * wr[k]);
      }
      if (q8)
        for (int64_t b = 0; b < K / 32; ++b) {
          double amax = 0, wsum = 0;
          for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
            amax = std::max(amax, double(std::fabs(xr[k])));
            wsum += std::fabs(wr[k]);
          }
          // d is amax/127 rounded to float: at most (1 + 2^-24) times the exact step.
          qerr += wsum * (amax / 127.0) / 2.0 * (1 + std::ldexp(1.0, -24));
        }
      double split = 0;
      if (has_min) {
        const float* ar = wa.data() + jj * K;
        for (int64_t k = 0; k < K; ++k) split += std::fabs(double(xr[k])) * (std::fabs(ar[k]) + std::fabs(double(ar[k]) - wr[k]));
      }
      const double tol = 2.0 * K * std::ldexp(1.0, -24) * mag + qerr + 4.0 * std::ldexp(1.0, -24) * split;
      ASSERT_NEAR(got[size_t(i * n + jj)], ref, tol) << f.name << " m=" << m << " row " << i << " col " << jj;
    }
}

void check(uint32_t format, int64_t m, bool repack = false) {
  const bool kquant = format == quant::kQ4_K || format == quant::kQ5_K || format == quant::kQ6_K;
  for (const char* isa : test::isa_levels_here()) {
    if (repack && std::string(isa) != "native") break;  // q4_0x16 has one kernel (VNNI)
    check_at(format, m, repack, 256, isa);
    if (kquant) check_at(format, m, repack, 512, isa);  // two super-blocks per row
    if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
  }
}

class QMatMul : public ::testing::TestWithParam<uint32_t> {};
TEST_P(QMatMul, DecodeGemvOneRow) { check(GetParam(), 1); }
TEST_P(QMatMul, DecodeGemvFewRows) { check(GetParam(), 5); }
TEST_P(QMatMul, PrefillGemm) { check(GetParam(), 37); }
// 17 rows: Q8_0 / Q4_0 / IQ4 take the int8 panel GEMM (AVX2 and AVX-512 levels), the other
// block formats still their BlockDot kernels (the panel pays from 24 rows), F16 / F32 SGEMM.
TEST_P(QMatMul, ShortPrefill) { check(GetParam(), 17); }

INSTANTIATE_TEST_SUITE_P(Formats, QMatMul, ::testing::Values(1u, 30u, 2u, 3u, 6u, 7u, 8u, 10u, 11u, 12u, 13u, 14u, 20u, 23u),
                         [](const auto& info) { return std::string(quant::get(info.param).name); });

TEST(QMatMulRepacked, Q4_0x16DecodeAndPrefill) {
  check(quant::kQ4_0, 1, true);
  check(quant::kQ4_0, 3, true);
  check(quant::kQ4_0, 37, true);
}

// The word-parallel unpacking of the Q4_K / Q5_K scales against the per-index reference
// (quant::detail::scale_min_k4, bit-exact with ggml's): every value of each byte, each
// byte position, and random 12-byte groups.
TEST(QMatMulKScales, WordUnpackEqualsTheReference) {
  auto check = [](const uint8_t* q) {
    uint8_t sc[8], mn[8];
    cpu::unpack_scales_k4(q, sc, mn);
    for (int j = 0; j < 8; ++j) {
      uint8_t d = 0, m = 0;
      quant::detail::scale_min_k4(j, q, d, m);
      ASSERT_EQ(sc[j], d) << "scale " << j;
      ASSERT_EQ(mn[j], m) << "min " << j;
    }
  };
  uint8_t q[12];
  for (int at = 0; at < 12; ++at)
    for (int v = 0; v < 256; ++v) {
      std::memset(q, 0x5A, sizeof q);
      q[at] = static_cast<uint8_t>(v);
      check(q);
    }
  std::mt19937 rng(12);
  for (int i = 0; i < 10000; ++i) {
    for (uint8_t& b : q) b = static_cast<uint8_t>(rng());
    check(q);
  }
}

// The activation quantizer on blocks an f32 product treats specially: inf or NaN gives a NaN
// scale and zero values (a GGUF fuzz finding: through 1/d the values became NaN and their int
// sum overflowed), a block below ~3.7e-37 is zero (1/d would be inf), and an ordinary block
// keeps d = amax/127 with values rounded to nearest even.
TEST(QMatMulActivations, NonFiniteAndTinyBlocks) {
  const float inf = INFINITY, nan = NAN;
  std::vector<float> x(4 * 32, 0.0f);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i - 16) * 0.5f;  // block 0: ordinary, amax 8
  x[32 + 5] = inf;                                                    // block 1: inf
  x[64 + 7] = nan;                                                    // block 2: NaN
  x[64 + 8] = 3.0f;
  for (int i = 0; i < 32; ++i) x[size_t(96 + i)] = (i % 2 ? 1e-40f : -2e-39f);  // block 3: subnormal
  for (int offset : {0, 128}) {
    float xs[4], xsum[4];
    int8_t xq[4 * 32];
    cpu::quantize_activations_q8(x.data(), 128, xs, xq, xsum, offset);
    EXPECT_EQ(xs[0], 8.0f / 127.0f);
    int32_t sum0 = 0;
    for (int i = 0; i < 32; ++i) {
      const int32_t q = int32_t(static_cast<int8_t>(static_cast<uint8_t>(xq[i]) - offset));
      EXPECT_EQ(q, int32_t(std::nearbyint(x[size_t(i)] / (8.0f / 127.0f)))) << i;
      sum0 += q;
    }
    EXPECT_EQ(xsum[0], float(sum0));
    EXPECT_TRUE(std::isnan(xs[1]));
    EXPECT_TRUE(std::isnan(xs[2]));
    EXPECT_EQ(xs[3], 0.0f);
    for (int b = 1; b < 4; ++b) {
      EXPECT_EQ(xsum[b], 0.0f) << b;
      for (int i = 0; i < 32; ++i)
        EXPECT_EQ(static_cast<uint8_t>(xq[32 * b + i]), uint8_t(offset)) << b << " " << i;
    }
  }
  // Through a Q8_0 decode product: a NaN or an inf in x makes every output NaN, as in f32;
  // subnormal activations give zeros.
  const int64_t K = 64, N = 3;
  std::vector<float> wf(size_t(N * K));
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = float(int(i % 7) - 3) * 0.25f;
  std::vector<uint8_t> wq(size_t(N) * 68);
  for (int64_t r = 0; r < N; ++r) quant::quantize(quant::kQ8_0, wf.data() + r * K, wq.data() + r * 68, K);
  Graph g;
  Value xv = g.input("x", Shape({1, K}, DType::F32));
  Value wv = g.param("w", Shape({N, 68}, DType::U8));
  g.set_outputs({g.qmatmul(xv, wv, quant::kQ8_0, K)});
  CompiledGraph net = Session().compile(g);
  net.set_param_typed("w", wq.data(), wq.size(), DType::U8);
  for (float bad : {nan, inf, -inf}) {
    std::vector<float> xin(size_t(K), 1.0f);
    xin[40] = bad;
    const std::vector<std::vector<float>> y = net.run({{"x", xin}});
    for (float v : y[0]) EXPECT_TRUE(std::isnan(v)) << bad;
  }
  std::vector<float> tiny(size_t(K), 1e-40f);
  const std::vector<std::vector<float>> z = net.run({{"x", tiny}});
  for (float v : z[0]) EXPECT_EQ(v, 0.0f);
}

TEST(QMatMulInfer, RefusesMismatchedWeights) {
  Graph g;
  Value x = g.input("x", Shape({2, 64}, DType::F32));
  Value w = g.input("w", Shape({3, 68}, DType::U8));   // 64 q8_0 elements = 68 bytes
  EXPECT_NO_THROW(g.qmatmul(x, w, quant::kQ8_0, 64));
  EXPECT_THROW(g.qmatmul(x, w, quant::kQ4_0, 64), Error);  // 36 bytes per row expected
  EXPECT_THROW(g.qmatmul(x, w, quant::kQ8_0, 32), Error);  // x has 64 features
  EXPECT_THROW(g.qmatmul(x, w, 4, 64), Error);             // a retired ggml type
  Value w18 = g.input("w18", Shape({3, 36}, DType::U8));
  EXPECT_THROW(g.qmatmul(x, w18, quant::kQ4_0x16, 64), Error);  // 3 rows: not panels of 16
  Value w2 = g.input("w2", Shape({3, 68}, DType::F32));
  EXPECT_THROW(g.qmatmul(x, w2, quant::kQ8_0, 64), Error);
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

// qmatmul_id against qmatmul of each (token, slot) with its expert's matrix: the same
// kernels run on gathered rows, so the results must be identical, on both paths.
void check_id(int64_t T, bool x_per_slot) {
  const int64_t E = 3, S = 2, K = 64, N = 24;
  const uint32_t fmt = quant::kQ8_0;
  const int64_t rb = quant::row_bytes(fmt, K);
  std::mt19937 rng(uint32_t(T) * 7 + x_per_slot);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> wf(size_t(E * N * K));
  for (float& v : wf) v = nd(rng);
  std::vector<uint8_t> w(size_t(E * N * rb));
  for (int64_t r = 0; r < E * N; ++r) quant::quantize(fmt, wf.data() + r * K, w.data() + r * rb, K);
  std::vector<float> x(size_t(T * (x_per_slot ? S : 1) * K));
  for (float& v : x) v = nd(rng);
  std::vector<int64_t> ids(size_t(T * S));
  for (auto& id : ids) id = int64_t(rng() % uint32_t(E));
  Graph g;
  Value xv = g.input("x", x_per_slot ? Shape({T, S, K}, DType::F32) : Shape({T, K}, DType::F32));
  Value wv = g.input("w", Shape({E, N, rb}, DType::U8));
  Value iv = g.input("ids", Shape({T, S}, DType::I64));
  Value y = g.qmatmul_id(xv, wv, iv, fmt, K);
  auto got = test::from_bytes<float>(test::run_kernel(g, y.node, {test::to_bytes(x), w, test::to_bytes(ids)}, 2)[0]);
  ASSERT_EQ(got.size(), size_t(T * S * N));
  // Reference: the rows of each expert through qmatmul, with the same number of rows per
  // call as qmatmul_id groups them (the GEMV / GEMM path depends on it).
  for (int64_t e = 0; e < E; ++e) {
    std::vector<int64_t> pairs;
    for (int64_t p = 0; p < T * S; ++p)
      if (ids[size_t(p)] == e) pairs.push_back(p);
    if (pairs.empty()) continue;
    const int64_t m = int64_t(pairs.size());
    std::vector<float> xe;
    for (int64_t p : pairs) {
      const float* src = x.data() + (x_per_slot ? p : p / S) * K;
      xe.insert(xe.end(), src, src + K);
    }
    Graph h;
    Value hx = h.input("x", Shape({m, K}, DType::F32));
    Value hw = h.input("w", Shape({N, rb}, DType::U8));
    Value hy = h.qmatmul(hx, hw, fmt, K);
    std::vector<uint8_t> we(w.begin() + e * N * rb, w.begin() + (e + 1) * N * rb);
    auto ref = test::from_bytes<float>(test::run_kernel(h, hy.node, {test::to_bytes(xe), we}, 1)[0]);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < N; ++j)
        ASSERT_EQ(got[size_t(pairs[size_t(i)] * N + j)], ref[size_t(i * N + j)]) << "expert " << e << " pair " << pairs[size_t(i)];
  }
  // An id outside [0, E) is an error naming it, not a wild read.
  ids[0] = E;
  try {
    test::run_kernel(g, y.node, {test::to_bytes(x), w, test::to_bytes(ids)}, 1);
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("expert id 3"), std::string::npos) << err.what();
  }
}

TEST(QMatMulId, DecodeSharedInput) { check_id(1, false); }
TEST(QMatMulId, PrefillSharedInput) { check_id(19, false); }
TEST(QMatMulId, PrefillPerSlotInput) { check_id(19, true); }

}  // namespace
}  // namespace rlx
