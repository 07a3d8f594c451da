// Scalar dot kernels of qmatmul: the portable table (no SIMD) and the reference the
// vector kernels are checked against in the tests. Same arithmetic as the vector kernels
// (int8 block products, one float scale product per block), summed in plain order.
#include <cstring>

#include "backends/cpu/kernels/qdot.h"
#include "ir/quant/block_util.h"
#include "rlx/dtype.h"
#include "rlx/quant.h"

namespace rlx::cpu {

namespace {

using quant::detail::h2f;

float scalar_q8_0(const uint8_t* w, const float* xs, const int8_t* xq, int64_t nb) {
  float s = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + 34 * b;
    int32_t acc = 0;
    for (int i = 0; i < 32; ++i) acc += int32_t(int8_t(blk[2 + i])) * xq[32 * b + i];
    s += h2f(blk) * xs[b] * float(acc);
  }
  return s;
}
float scalar_q4_0(const uint8_t* w, const float* xs, const int8_t* xq, const float*, int64_t nb) {
  float s = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + 18 * b;
    int32_t acc = 0;
    for (int i = 0; i < 16; ++i) {
      acc += ((blk[2 + i] & 0x0F) - 8) * xq[32 * b + i];
      acc += ((blk[2 + i] >> 4) - 8) * xq[32 * b + 16 + i];
    }
    s += h2f(blk) * xs[b] * float(acc);
  }
  return s;
}
float scalar_f16(const uint16_t* w, const float* x, int64_t k) {
  float s = 0;
  for (int64_t i = 0; i < k; ++i) s += f16_to_f32(w[i]) * x[i];
  return s;
}
float scalar_f32(const float* w, const float* x, int64_t k) {
  float s = 0;
  for (int64_t i = 0; i < k; ++i) s += w[i] * x[i];
  return s;
}
void scalar_axpy_f16(float a, const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * f16_to_f32(x[i]);
}
void scalar_axpy_f32(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 (layouts: QbLayout, qdot.h).
template <uint32_t F>
void scalar_qb(const uint8_t* w, int64_t nb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx,
               int64_t m, float* out, int64_t ldo) {
  using L = QbLayout<F>;
  constexpr bool q8 = L::q8, five = L::five, has_min = L::has_min;
  constexpr float offset = float(L::offset);
  constexpr int bytes = L::bytes;
  const int64_t ldb = ldx / 32;
  for (int64_t r = 0; r < m; ++r) {
    float acc = 0, corr = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + b * bytes;
      const float d = h2f(blk), mterm = has_min ? h2f(blk + 2) : -offset * d;
      uint32_t qh = 0;
      if (five) std::memcpy(&qh, blk + L::qh_at, 4);
      const uint8_t* qs = blk + L::qs_at;
      int32_t dot = 0;
      for (int e = 0; e < 32; ++e) {
        const int q = q8 ? int(int8_t(qs[e])) : (e < 16 ? qs[e] & 0x0F : qs[e - 16] >> 4) | (five && (qh >> e & 1) ? 16 : 0);
        dot += q * xq[r * ldx + 32 * b + e];
      }
      const float sx = xs[r * ldb + b];
      acc += d * sx * float(dot);
      if (!q8) corr += mterm * sx * xsum[r * ldb + b];
    }
    out[r * ldo] = acc + corr;
  }
}

// Q4_K / Q5_K (layout: K4Block, qdot.h).
template <bool Five>
void scalar_k4(const uint8_t* w, int64_t nsb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx,
               int64_t m, float* out, int64_t ldo) {
  const int64_t ldb = ldx / 32;
  for (int64_t r = 0; r < m; ++r) {
    const int8_t* xr = xq + r * ldx;
    const float *sr = xs + r * ldb, *ur = xsum + r * ldb;
    float acc = 0, accm = 0;
    for (int64_t s = 0; s < nsb; ++s) {
      const K4Block kb = k4_block(w + s * (Five ? 176 : 144), Five);
      const float d = kb.d, dmin = kb.dmin;
      const uint8_t *sc = kb.sc, *mn = kb.mn, *qh = kb.qh, *qs = kb.qs;
      for (int j = 0; j < 8; ++j) {
        const int64_t b = 8 * s + j;
        int32_t dot = 0;
        for (int l = 0; l < 32; ++l) {
          int q = (j & 1) ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 0x0F;
          if (Five && (qh[l] >> j & 1)) q += 16;
          dot += q * xr[32 * b + l];
        }
        acc += d * float(sc[j]) * sr[b] * float(dot);
        accm += dmin * float(mn[j]) * sr[b] * ur[b];
      }
    }
    out[r * ldo] = acc - accm;
  }
}

// Q6_K (210 bytes): ql[128], qh[64], 16 int8 scales (one per 16 elements), d. In each
// half h of 128 elements (ql + 64h, qh + 32h), for l < 32: element l is ql[l] & 15 with
// qh bits 0-1, element 32 + l is ql[32 + l] & 15 with bits 2-3, 64 + l is ql[l] >> 4 with
// bits 4-5, 96 + l is ql[32 + l] >> 4 with bits 6-7; the value is that 6-bit number - 32.
void scalar_q6_k(const uint8_t* w, int64_t nsb, const int8_t* xq, const float* xs, const float*, int64_t ldx,
                 int64_t m, float* out, int64_t ldo) {
  const int64_t ldb = ldx / 32;
  for (int64_t r = 0; r < m; ++r) {
    const int8_t* xr = xq + r * ldx;
    const float* sr = xs + r * ldb;
    float acc = 0;
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* blk = w + s * 210;
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
      const float d = h2f(blk + 208);
      for (int b = 0; b < 8; ++b) {  // activation block b: elements 32b..32b+31 of the super-block
        const int h = b / 4, part = b % 4;
        const uint8_t* ql = blk + 64 * h + (part & 1) * 32;
        const uint8_t* qh = blk + 128 + 32 * h;
        int32_t dot = 0;
        for (int l = 0; l < 32; ++l) {
          const int lo = (part < 2) ? ql[l] & 0x0F : ql[l] >> 4;
          const int q = (lo | (((qh[l] >> (2 * part)) & 3) << 4)) - 32;
          dot += sc[2 * b + l / 16] * q * xr[256 * s + 32 * b + l];
        }
        acc += d * sr[8 * s + b] * float(dot);
      }
    }
    out[r * ldo] = acc;
  }
}

}  // namespace

const QDotKernels* qdot_scalar_kernels() {
  static const QDotKernels k{.q8_0 = scalar_q8_0,
                             .q4_0 = scalar_q4_0,
                             .f16 = scalar_f16,
                             .f32 = scalar_f32,
                             .q8_0_rows = scalar_qb<quant::kQ8_0>,
                             .q4_0_rows = scalar_qb<quant::kQ4_0>,
                             .q4_1 = scalar_qb<quant::kQ4_1>,
                             .q5_0 = scalar_qb<quant::kQ5_0>,
                             .q5_1 = scalar_qb<quant::kQ5_1>,
                             .q4_k = scalar_k4<false>,
                             .q5_k = scalar_k4<true>,
                             .q6_k = scalar_q6_k,
                             .axpy_f16 = scalar_axpy_f16,
                             .axpy_f32 = scalar_axpy_f32};
  return &k;
}

}  // namespace rlx::cpu
