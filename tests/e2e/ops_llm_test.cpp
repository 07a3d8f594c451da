// End-to-end cases of the LLM ops: qmatmul (block-quantized weights read as stored),
// qmatmul_id (mixture of experts) and kv_attention (attention over a KV cache), compiled
// through Session and compared with double-precision references on the dequantized weights.
// Tolerances (per output, the largest over the outputs is used): the f32 dot-product bound,
// plus for block formats the activation quantization the CPU kernels do (x per 32-block,
// step amax/127, error <= step/2 per element, times sum |w| of the block) and, for formats
// with a min or offset (w = a + m, applied separately), 4 * 2^-24 * sum |x| (|a| + |m|).
// tests/cpu/qmatmul_test.cpp has the per-format, per-ISA kernel tests.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "op_cases.h"
#include "rlx/quant.h"

namespace rlx::e2e {
namespace {

using Ins = const std::vector<Value>&;
using Outs = std::vector<Value>;

// Absolute error bound of a float dot product of k terms whose |terms| sum to `mag`:
// 2 * k * 2^-24 * mag (the standard k*u bound, slack 2 for the summation order). Outputs
// near zero come from cancellation, where a relative tolerance alone would be too strict.
double f32_dot_bound(int64_t k, double mag) { return 2.0 * double(k) * std::ldexp(1.0, -24) * mag; }

// The min / offset part m of each weight (w = a + m) of Q5_0, Q4_K and Q2_K rows: Q5_0's
// -16 d is the block with every value zeroed (bytes 2..21), Q4_K's -dmin * min the block
// with d (bytes 0-1) zeroed, Q2_K's the block with d (bytes 80-81) zeroed. Zero for other
// formats.
constexpr uint32_t kQ2_K = 10, kQ3_K = 11, kIQ4_NL = 20, kIQ4_XS = 23, kF64 = 28;
std::vector<float> min_part(uint32_t fmt, std::vector<uint8_t> q, int64_t n) {
  const quant::Format& f = quant::get(fmt);
  std::vector<float> m(size_t(n), 0.0f);
  if (fmt != quant::kQ5_0 && fmt != quant::kQ4_K && fmt != kQ2_K) return m;
  for (size_t o = 0; o + f.block_bytes <= q.size(); o += size_t(f.block_bytes)) {
    if (fmt == quant::kQ5_0) std::fill(q.begin() + o + 2, q.begin() + o + 22, 0);
    else if (fmt == kQ2_K) q[o + 80] = q[o + 81] = 0;
    else q[o] = q[o + 1] = 0;
  }
  quant::dequantize(fmt, q.data(), m.data(), n);
  return m;
}

// Rows of a format rlx reads but does not quantize to (Q2_K, Q3_K, IQ4_NL, IQ4_XS, F64):
// random bytes, each block's f16 scales then set to random finite values about as large as
// quantizing values in [-1, 1] would make them; F64 as doubles in [-1, 1].
void random_rows(Rng& rng, uint32_t fmt, std::vector<uint8_t>& q) {
  if (fmt == kF64) {
    for (size_t o = 0; o + 8 <= q.size(); o += 8) {
      const double v = rng.uniform(-1, 1);
      std::memcpy(q.data() + o, &v, 8);
    }
    return;
  }
  for (uint8_t& b : q) b = uint8_t(rng.integer(0, 255));
  struct Scale {
    size_t at;
    double lo, hi;
  };
  std::vector<Scale> scales;
  if (fmt == kQ2_K) scales = {{80, 0.005, 0.02}, {82, 0.005, 0.02}};  // d, dmin (x 15 x 3)
  if (fmt == kQ3_K) scales = {{108, 0.002, 0.008}};                    // d (x 32 x 4)
  if (fmt == kIQ4_NL) scales = {{0, 0.002, 0.008}};                    // d (x 127)
  if (fmt == kIQ4_XS) scales = {{0, 0.0001, 0.0003}};                  // d (x 32 x 127)
  const size_t bb = size_t(quant::get(fmt).block_bytes);
  for (size_t o = 0; o + bb <= q.size(); o += bb)
    for (const Scale& s : scales) {
      const float v = float(rng.uniform(s.lo, s.hi));
      quant::quantize(quant::kF16, &v, q.data() + o + s.at, 1);
    }
}

// Rows [rows, k] of `fmt` in bytes q as a u8 [rows, row_bytes] tensor, with their values
// deq (and, in `mins`, their min / offset parts).
std::pair<T, std::vector<float>> weights(uint32_t fmt, const std::vector<uint8_t>& q, int64_t rows, int64_t k,
                                         std::vector<float> deq, std::vector<float>* mins) {
  if (mins) *mins = min_part(fmt, q, rows * k);
  T t({rows, quant::row_bytes(fmt, k)}, DType::U8);
  for (size_t i = 0; i < q.size(); ++i) t.v[i] = q[i];
  return {t, std::move(deq)};
}

// W [rows, k] quantized to `fmt` (random blocks where rlx has no quantizer), as a u8
// [rows, row_bytes] tensor, and its dequantized values (with, in `mins`, their min /
// offset parts).
std::pair<T, std::vector<float>> quantized(Rng& rng, int64_t rows, int64_t k, uint32_t fmt,
                                           std::vector<float>* mins = nullptr) {
  std::vector<float> w(size_t(rows * k));
  for (float& v : w) v = float(rng.uniform(-1, 1));
  const int64_t rb = quant::row_bytes(fmt, k);
  std::vector<uint8_t> q(size_t(rows * rb));
  if (quant::can_quantize(fmt)) {
    for (int64_t r = 0; r < rows; ++r) quant::quantize(fmt, w.data() + r * k, q.data() + r * rb, k);
  } else {
    random_rows(rng, fmt, q);
  }
  std::vector<float> deq(w.size());
  quant::dequantize(fmt, q.data(), deq.data(), rows * k);
  return weights(fmt, q, rows, k, std::move(deq), mins);
}

// ggml's own blocks of `fmt` (tests/data/gguf/quants: made by ggml's quantizers, with ggml's
// dequantization beside them) as rows of k elements: the weights and ggml's values of
// them, an independent reference for a backend's decoding. The data directory is
// RLX_SOURCE_DIR from the environment (a copy of the tree elsewhere, e.g. on a GPU machine),
// else the one this test was built from.
std::pair<T, std::vector<float>> ggml_rows(uint32_t fmt, int64_t k, int64_t& rows, std::vector<float>* mins) {
  const char* env = std::getenv("RLX_SOURCE_DIR");
  const std::string base = std::string(env && *env ? env : RLX_SOURCE_DIR) + "/tests/data/gguf/quants/" +
                           quant::get(fmt).name;
  auto read = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(ErrorCategory::Io, "missing fixture " + path);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  std::vector<uint8_t> q = read(base + ".blocks");
  const std::vector<uint8_t> ref = read(base + ".f32");
  rows = int64_t(ref.size() / 4) / k;
  const size_t bytes = size_t(rows * quant::row_bytes(fmt, k));
  if (q.size() < bytes) throw Error(ErrorCategory::Io, "fixture " + base + ".blocks is short");
  q.resize(bytes);
  std::vector<float> deq(size_t(rows * k));
  std::memcpy(deq.data(), ref.data(), deq.size() * 4);
  return weights(fmt, q, rows, k, std::move(deq), mins);
}

// residual: the product plus an [m, n] input (what a decoder layer adds its projections
// to; CUDA runs the two as one kernel), one more f32 rounding: 2^-24 of the sum.
// n < 0: the weights are ggml's blocks (ggml_rows; n becomes their row count).
OpCase qmatmul_case(const std::string& name, uint32_t fmt, int64_t m, int64_t n_rows, int64_t k, bool residual = false) {
  return {name, [=] {
            Rng rng(uint32_t(900 + fmt + m));
            T x = rng.tensor({m, k});
            std::vector<float> mins;
            int64_t n = n_rows;
            auto [w, deq] = n_rows < 0 ? ggml_rows(fmt, k, n, &mins) : quantized(rng, n, k, fmt, &mins);
            const bool quantizes_x = fmt != quant::kF32 && fmt != quant::kF16 && fmt != quant::kBF16 && fmt != kF64;
            T want({m, n});
            double atol = 0;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double s = 0, a = 0, qerr = 0, split = 0;
                for (int64_t e = 0; e < k; ++e) {
                  const double xe = x.v[size_t(i * k + e)], we = deq[size_t(j * k + e)], me = mins[size_t(j * k + e)];
                  s += xe * we;
                  a += std::fabs(xe * we);
                  split += std::fabs(xe) * (std::fabs(we - me) + std::fabs(me));
                }
                if (quantizes_x)
                  for (int64_t b = 0; b < k / 32; ++b) {
                    double amax = 0, wsum = 0;
                    for (int64_t e = 32 * b; e < 32 * b + 32; ++e) {
                      amax = std::max(amax, std::fabs(x.v[size_t(i * k + e)]));
                      wsum += std::fabs(deq[size_t(j * k + e)]);
                    }
                    qerr += wsum * amax / 127.0 / 2.0 * (1 + std::ldexp(1.0, -24));
                  }
                want.v[size_t(i * n + j)] = s;
                atol = std::max(atol, f32_dot_bound(k, a) + qerr + 4.0 * std::ldexp(1.0, -24) * split);
              }
            if (!residual) {
              check_op(name, {x, w}, [&](Graph& g, Ins in) { return Outs{g.qmatmul(in[0], in[1], fmt, k)}; }, {want},
                       2e-5, atol);
              return;
            }
            T r = rng.tensor({m, n});
            double big = 0;
            for (size_t i = 0; i < want.v.size(); ++i) {
              want.v[i] += r.v[i];
              big = std::max(big, std::fabs(want.v[i]));
            }
            check_op(name, {x, w, r}, [&](Graph& g, Ins in) { return Outs{g.add(g.qmatmul(in[0], in[1], fmt, k), in[2])}; },
                     {want}, 2e-5, atol + std::ldexp(big, -24));
          }};
}

// rms_norm of one row, then its product with F16 rows (a decode step's attention and FFN
// inputs; CUDA runs the two as one kernel): the reference normalizes in double. Bound: the
// f32 dot bound plus the normalized row's own error, each element within (k + 8) * 2^-24
// relative (the k-term sum of squares, the rsqrt, the two products), times sum |x w|.
OpCase norm_qmatmul_case(const std::string& name, int64_t k, int64_t n) {
  return {name, [=] {
            Rng rng(uint32_t(950 + k));
            T x = rng.tensor({1, k}), scale = rng.tensor({k}, 0.5, 1.5);
            auto [w, deq] = quantized(rng, n, k, quant::kF16);
            const double eps = 1e-5;
            double ms = 0;
            for (double v : x.v) ms += v * v;
            const double inv = 1.0 / std::sqrt(ms / double(k) + eps);
            T want({1, n});
            double atol = 0;
            for (int64_t j = 0; j < n; ++j) {
              double s = 0, a = 0;
              for (int64_t e = 0; e < k; ++e) {
                const double xe = x.v[size_t(e)] * inv * scale.v[size_t(e)], p = xe * deq[size_t(j * k + e)];
                s += p;
                a += std::fabs(p);
              }
              want.v[size_t(j)] = s;
              atol = std::max(atol, f32_dot_bound(k, a) + double(k + 8) * std::ldexp(1.0, -24) * a);
            }
            check_op(name, {x, w, scale}, [&](Graph& g, Ins in) {
              return Outs{g.qmatmul(g.rms_norm(in[0], in[2], -1, eps), in[1], quant::kF16, k)};
            }, {want}, 2e-5, atol);
          }};
}

OpCase qmatmul_id_case() {
  return {"qmatmul_id_f16_experts", [] {
            Rng rng(77);
            const int64_t E = 3, N = 4, K = 32, Tn = 4, S = 2;
            T x = rng.tensor({Tn, K});
            auto [w, deq] = quantized(rng, E * N, K, quant::kF16);
            w.dims = {E, N, quant::row_bytes(quant::kF16, K)};
            T ids({Tn, S}, std::vector<double>{2, 0, 1, 2, 0, 0, 2, 1}, DType::I64);
            T want({Tn, S, N});
            double mag = 0;
            for (int64_t t = 0; t < Tn; ++t)
              for (int64_t s = 0; s < S; ++s)
                for (int64_t j = 0; j < N; ++j) {
                  const int64_t e = int64_t(ids.v[size_t(t * S + s)]);
                  double acc = 0, a = 0;
                  for (int64_t i = 0; i < K; ++i) {
                    acc += x.v[size_t(t * K + i)] * deq[size_t((e * N + j) * K + i)];
                    a += std::fabs(x.v[size_t(t * K + i)] * deq[size_t((e * N + j) * K + i)]);
                  }
                  want.v[size_t((t * S + s) * N + j)] = acc;
                  mag = std::max(mag, a);
                }
            check_op("qmatmul_id_f16_experts", {x, w, ids}, [&](Graph& g, Ins in) {
              return Outs{g.qmatmul_id(in[0], in[1], in[2], quant::kF16, K)};
            }, {want}, 2e-5, f32_dot_bound(K, mag));
          }};
}

// Queries [B, Hq, Tn, D] over caches [B, Hkv, C, D] of sequences b holding past[b] rows,
// against a double-precision reference. f16: the caches and new rows are f16 (their values
// rounded first, so the reference sees what the kernel reads).
OpCase kv_attention_case(const std::string& name, int64_t B, int64_t Hq, int64_t Hkv, int64_t Tn, int64_t C, int64_t D,
                         std::vector<int64_t> pasts, bool f16) {
  return {name, [=] {
            Rng rng(uint32_t(78 + D + B));
            const DType kt = f16 ? DType::F16 : DType::F32;
            auto kv = [&](std::vector<int64_t> dims) {
              T x = rng.tensor(std::move(dims));
              x.dtype = kt;
              for (double& v : x.v) v = round_to(v, kt);
              return x;
            };
            T q = rng.tensor({B, Hq, Tn, D});
            T kc = kv({B, Hkv, C, D}), vc = kv({B, Hkv, C, D}), kn = kv({B, Hkv, Tn, D}), vn = kv({B, Hkv, Tn, D});
            std::vector<double> pv(pasts.begin(), pasts.end());
            T p({B}, pv, DType::I64);
            T want({B, Hq, Tn, D});
            const int64_t group = Hq / Hkv;
            for (int64_t b = 0; b < B; ++b)
              for (int64_t h = 0; h < Hq; ++h)
                for (int64_t t = 0; t < Tn; ++t) {
                  const int64_t past = pasts[size_t(b)], n = past + t + 1, hk = h / group;
                  auto row = [&](const T& cache, const T& fresh, int64_t j) {
                    return j < past ? &cache.v[size_t(((b * Hkv + hk) * C + j) * D)]
                                    : &fresh.v[size_t(((b * Hkv + hk) * Tn + j - past) * D)];
                  };
                  const double* qr = &q.v[size_t(((b * Hq + h) * Tn + t) * D)];
                  std::vector<double> s(static_cast<size_t>(n), 0.0);
                  double mx = -INFINITY, sum = 0;
                  for (int64_t j = 0; j < n; ++j) {
                    for (int64_t e = 0; e < D; ++e) s[size_t(j)] += qr[e] * row(kc, kn, j)[e];
                    s[size_t(j)] /= std::sqrt(double(D));
                    mx = std::max(mx, s[size_t(j)]);
                  }
                  for (double& v : s) sum += v = std::exp(v - mx);
                  for (int64_t e = 0; e < D; ++e) {
                    double o = 0;
                    for (int64_t j = 0; j < n; ++j) o += s[size_t(j)] / sum * row(vc, vn, j)[e];
                    want.v[size_t(((b * Hq + h) * Tn + t) * D + e)] = o;
                  }
                }
            check_op(name, {q, kc, vc, kn, vn, p}, [&](Graph& g, Ins in) {
              return Outs{g.kv_attention(in[0], in[1], in[2], in[3], in[4], in[5])};
            }, {want});
          }};
}

// Two sequences at different positions, two heads: rows land at past[b] .. past[b] + T of
// their own (sequence, head); everything else is the cache as given. Exact (a copy).
OpCase cache_write_case() {
  return {"cache_write_two_sequences", [] {
            Rng rng(79);
            const int64_t B = 2, H = 2, C = 5, Tn = 2, D = 3;
            T cache = rng.tensor({B, H, C, D}), rows = rng.tensor({B, H, Tn, D});
            T p({B}, std::vector<double>{0, 3}, DType::I64);
            T want = cache;
            for (int64_t bh = 0; bh < B * H; ++bh)
              for (int64_t t = 0; t < Tn; ++t)
                for (int64_t e = 0; e < D; ++e)
                  want.v[size_t((bh * C + int64_t(p.v[size_t(bh / H)]) + t) * D + e)] = rows.v[size_t((bh * Tn + t) * D + e)];
            check_op("cache_write_two_sequences", {cache, rows, p}, [&](Graph& g, Ins in) {
              return Outs{g.cache_write(in[0], in[1], in[2])};
            }, {want}, 0.0, 0.0);
          }};
}

// f32 rows rounded to an f16 cache on the way in (the decode step's cast then
// cache_write; CUDA runs the two as one kernel): the cache as given but for the rounded
// rows, and the rounded rows themselves when `keep_rows` makes them an output too. Exact:
// the reference rounds each value to f16 the same way (to nearest even).
OpCase cache_write_cast_case(bool keep_rows) {
  return {keep_rows ? "cache_write_f16_cast_rows_kept" : "cache_write_f16_cast", [=] {
            Rng rng(keep_rows ? 83 : 81);
            const int64_t B = 1, H = 3, C = 6, Tn = 1, D = 8;
            T cache = rng.tensor({B, H, C, D}), rows = rng.tensor({B, H, Tn, D});
            cache.dtype = DType::F16;
            for (double& v : cache.v) v = round_to(v, DType::F16);
            T p({B}, std::vector<double>{4}, DType::I64);
            T want = cache, rounded = rows;
            rounded.dtype = DType::F16;
            for (double& v : rounded.v) v = round_to(v, DType::F16);
            for (int64_t h = 0; h < H; ++h)
              for (int64_t e = 0; e < D; ++e) want.v[size_t((h * C + 4) * D + e)] = rounded.v[size_t(h * D + e)];
            const std::string name = keep_rows ? "cache_write_f16_cast_rows_kept" : "cache_write_f16_cast";
            check_op(name, {cache, rows, p}, [&](Graph& g, Ins in) {
              Value r = g.cast(in[1], DType::F16);
              Value c = g.cache_write(in[0], r, in[2]);
              return keep_rows ? Outs{c, r} : Outs{c};
            }, keep_rows ? std::vector<T>{want, rounded} : std::vector<T>{want}, 0.0, 0.0);
          }};
}

// Q and K of a decode step rotated by the same tables (CUDA runs the two as one launch):
// each pair (x0, x1) -> (x0 cos - x1 sin, x1 cos + x0 sin), the reference in double; two
// f32 products and a sum: 3 roundings of values up to |x0| + |x1|.
OpCase rotary_pair_case() {
  return {"rotary_q_and_k", [] {
            Rng rng(85);
            const int64_t Hq = 4, Hk = 2, D = 16, half = D / 2;
            T q = rng.tensor({1, Hq, 1, D}), k = rng.tensor({1, Hk, 1, D}), cs({1, half}), sn({1, half});
            for (int64_t i = 0; i < half; ++i) {
              const double th = 7.0 * std::pow(10000.0, -2.0 * double(i) / double(D));
              cs.v[size_t(i)] = double(float(std::cos(th)));
              sn.v[size_t(i)] = double(float(std::sin(th)));
            }
            auto rot = [&](const T& x) {
              T y = x;
              for (int64_t r = 0; r < x.dims[1]; ++r)
                for (int64_t i = 0; i < half; ++i) {
                  const double x0 = x.v[size_t(r * D + 2 * i)], x1 = x.v[size_t(r * D + 2 * i + 1)];
                  y.v[size_t(r * D + 2 * i)] = x0 * cs.v[size_t(i)] - x1 * sn.v[size_t(i)];
                  y.v[size_t(r * D + 2 * i + 1)] = x1 * cs.v[size_t(i)] + x0 * sn.v[size_t(i)];
                }
              return y;
            };
            check_op("rotary_q_and_k", {q, k, cs, sn}, [&](Graph& g, Ins in) {
              return Outs{g.rotary(in[0], in[2], in[3], true), g.rotary(in[1], in[2], in[3], true)};
            }, {rot(q), rot(k)}, 0.0, 3.0 * std::ldexp(2.0, -24));
          }};
}

const bool kLlm = register_cases({
    {OpKind::QMatMul, qmatmul_case("qmatmul_f16_decode", quant::kF16, 2, 5, 64)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q5_0_prefill", 6, 11, 6, 64)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q4_K_prefill", quant::kQ4_K, 9, 3, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_f16_decode_residual", quant::kF16, 1, 40, 128, true)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q8_0_prefill_residual", quant::kQ8_0, 3, 7, 64, true)},
    // Every other format the CPU reads, decode (one row) and prefill (rows past the CPU's
    // per-row kernels), as a file of that type would bring them.
    {OpKind::QMatMul, qmatmul_case("qmatmul_bf16_decode", quant::kBF16, 1, 9, 136)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_bf16_prefill_odd_k", quant::kBF16, 10, 5, 37)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_f64_decode", kF64, 1, 5, 48)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_iq4_nl_prefill", kIQ4_NL, 10, 6, 96)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q2_K_decode", kQ2_K, 1, 7, 512)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q3_K_prefill", kQ3_K, 10, 5, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_iq4_xs_decode_residual", kIQ4_XS, 1, 6, 512, true)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q5_K_prefill", quant::kQ5_K, 10, 4, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q6_K_decode", quant::kQ6_K, 1, 5, 256)},
    // Rows of many blocks (9 super-blocks, 37 blocks): the device kernels that spread a warp
    // over several blocks at once take every round, and a short last one.
    {OpKind::QMatMul, qmatmul_case("qmatmul_q4_K_decode_long", quant::kQ4_K, 1, 5, 2304)},
    // F16 rows three times longer than the part the CUDA product fetches before its wait
    // (8 chunks of 8 halves a lane: 2,048), and rows whose last chunk only some lanes hold.
    {OpKind::QMatMul, qmatmul_case("qmatmul_f16_decode_long_residual", quant::kF16, 1, 6, 6400, true)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_f16_prefill_long", quant::kF16, 2, 5, 2056)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q5_K_decode_long", quant::kQ5_K, 1, 5, 2304)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q6_K_prefill_long", quant::kQ6_K, 3, 4, 2304)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q3_K_decode_long", kQ3_K, 1, 4, 2304)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q2_K_prefill_long", kQ2_K, 2, 3, 2304)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_iq4_xs_prefill_long", kIQ4_XS, 2, 3, 2304)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q4_1_decode_long", quant::kQ4_1, 1, 5, 1184)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q5_0_decode_long", quant::kQ5_0, 1, 4, 1184)},
    // SmolLM2's width: one round of sixteen blocks and a pair after it (the AVX-512 kernel).
    {OpKind::QMatMul, qmatmul_case("qmatmul_q5_0_decode_576", quant::kQ5_0, 1, 6, 576)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_q5_1_prefill_long", quant::kQ5_1, 2, 4, 1184)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_iq4_nl_decode_long", kIQ4_NL, 1, 4, 1184)},
    // ggml's own blocks of every format, its dequantization the reference.
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_f16", quant::kF16, 3, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_bf16", quant::kBF16, 1, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q4_0", quant::kQ4_0, 1, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q4_1", quant::kQ4_1, 10, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q5_0", quant::kQ5_0, 1, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q5_1", quant::kQ5_1, 3, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q8_0", quant::kQ8_0, 10, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q2_K", kQ2_K, 1, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q3_K", kQ3_K, 3, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q4_K", quant::kQ4_K, 1, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q5_K", quant::kQ5_K, 10, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_q6_K", quant::kQ6_K, 3, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_iq4_nl", kIQ4_NL, 1, -1, 256)},
    {OpKind::QMatMul, qmatmul_case("qmatmul_ggml_iq4_xs", kIQ4_XS, 10, -1, 256)},
    {OpKind::QMatMul, norm_qmatmul_case("qmatmul_f16_after_rms_norm_row", 1024, 24)},
    {OpKind::QMatMul, norm_qmatmul_case("qmatmul_f16_after_rms_norm_short_row", 192, 24)},
    {OpKind::Rotary, rotary_pair_case()},
    {OpKind::QMatMulId, qmatmul_id_case()},
    {OpKind::KvAttention, kv_attention_case("kv_attention_gqa_past3", 1, 2, 1, 2, 6, 8, {3}, false)},
    // Head dims the AVX-512 group kernels take (64: the outputs in registers; 128: a head's
    // chunks streamed), groups of 3 and 4 query heads, runs of cached rows across the
    // kernels' blocks of 16 rows (19, 37, 0), two sequences, f16 and f32 caches.
    {OpKind::KvAttention, kv_attention_case("kv_attention_d64_f16", 2, 6, 2, 2, 48, 64, {19, 37}, true)},
    {OpKind::KvAttention, kv_attention_case("kv_attention_d64_f32", 2, 6, 2, 1, 48, 64, {37, 0}, false)},
    {OpKind::KvAttention, kv_attention_case("kv_attention_d128_f16", 1, 8, 2, 3, 40, 128, {17}, true)},
    // One KV head, one query: with two threads its four query heads go to two tasks, with
    // one thread to one (check_op compares the two runs bit for bit).
    {OpKind::KvAttention, kv_attention_case("kv_attention_one_kv_head_split", 1, 4, 1, 1, 40, 64, {33}, true)},
    {OpKind::CacheWrite, cache_write_case()},
    {OpKind::CacheWrite, cache_write_cast_case(false)},
    {OpKind::CacheWrite, cache_write_cast_case(true)},
});

}  // namespace
}  // namespace rlx::e2e
