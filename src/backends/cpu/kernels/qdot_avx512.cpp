// AVX-512 VNNI dot kernels of qmatmul: two 32-element blocks per 512-bit register,
// u8 x s8 products summed into int32 by vpdpbusd (the sign trick: |w| as u8, x carrying
// w's sign), one float scale product per block pair. Chosen at run time when CPUID has
// AVX512F/DQ/BW/VL + VNNI; f16/f32 rows keep the AVX2 kernels.
#include <immintrin.h>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/qdot.h"
#include "rlx/quant.h"

RLX_ISA_REGION_BEGIN("avx512f,avx512dq,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
namespace rlx::cpu {
namespace {

#include "backends/cpu/kernels/qdot_region.h"
#include "backends/cpu/kernels/qdot_region_avx512.h"

// int32 lanes of sum(w * x) over 4-byte groups; lanes 0..7 from the low block, 8..15 high.
inline __m512i dot64(__m512i w, __m512i x) {
  const __m512i aw = _mm512_abs_epi8(w);
  const __mmask64 neg = _mm512_movepi8_mask(w);
  const __m512i sx = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sx);
}

inline __m512 scales2(float a, float b) {
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

inline __m512i pair256(const uint8_t* lo, const uint8_t* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)), 1);
}

float dot_q8_0(const uint8_t* w, const float* xs, const int8_t* xq, int64_t nb) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* p = w + 34 * b;
    const __m512i w0 = pair256(p + 2, p + 36), w1 = pair256(p + 70, p + 104);
    const __m512i x0 = _mm512_loadu_si512(xq + 32 * b), x1 = _mm512_loadu_si512(xq + 32 * b + 64);
    a0 = _mm512_fmadd_ps(scales2(half_at(p) * xs[b], half_at(p + 34) * xs[b + 1]), _mm512_cvtepi32_ps(dot64(w0, x0)), a0);
    a1 = _mm512_fmadd_ps(scales2(half_at(p + 68) * xs[b + 2], half_at(p + 102) * xs[b + 3]),
                         _mm512_cvtepi32_ps(dot64(w1, x1)), a1);
  }
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* p = w + 34 * b;
    a0 = _mm512_fmadd_ps(scales2(half_at(p) * xs[b], half_at(p + 34) * xs[b + 1]),
                         _mm512_cvtepi32_ps(dot64(pair256(p + 2, p + 36), _mm512_loadu_si512(xq + 32 * b))), a0);
  }
  if (b < nb) {  // a last odd block: the upper half of the pair is zero
    const uint8_t* p = w + 34 * b;
    const __m512i wv = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)));
    const __m512i xv = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * b)));
    a1 = _mm512_fmadd_ps(scales2(half_at(p) * xs[b], 0.0f),
                         _mm512_cvtepi32_ps(dot64(_mm512_zextsi256_si512(_mm512_castsi512_si256(wv)),
                                                  _mm512_zextsi256_si512(_mm512_castsi512_si256(xv)))), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

template <int R, int G, bool Mins>
void i8_panel_rows(const int8_t* panel, const float* d, const float* wsum, const float* mins, int64_t nb,
                   const uint8_t* xu, int64_t ldx, const float* xs, const float* xsum, float* c, int64_t ldc,
                   int64_t ncols) {
  static_assert(!Mins || G == 8, "mins are per 32 elements: blocks of 32 only");
  // G groups of 4 elements a block (8: blocks of 32, 4: blocks of 16); the activations'
  // scales are per 32.
  const int64_t ldb = ldx / 32;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i ai[R];
    for (int r = 0; r < R; ++r) ai[r] = _mm512_setzero_si512();
    const int8_t* pb = panel + b * 64 * G;
    for (int g = 0; g < G; ++g) {
      const __m512i wv = _mm512_loadu_si512(pb + 64 * g);
      for (int r = 0; r < R; ++r) {
        int32_t x4;
        __builtin_memcpy(&x4, xu + r * ldx + 4 * G * b + 4 * g, 4);
        ai[r] = _mm512_dpbusd_epi32(ai[r], _mm512_set1_epi32(x4), wv);
      }
    }
    const int64_t bx = b * G / 8;
    const __m512 dv = _mm512_loadu_ps(d + 16 * b), ws = _mm512_loadu_ps(wsum + 16 * b);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_set1_ps(xs[r * ldb + bx])),
                               _mm512_sub_ps(_mm512_cvtepi32_ps(ai[r]), ws), acc[r]);
    if constexpr (Mins) {
      const __m512 mv = _mm512_loadu_ps(mins + 16 * b);
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(mv, _mm512_set1_ps(xs[r * ldb + b] * xsum[r * ldb + b]), acc[r]);
    }
  }
  const __mmask16 keep = ncols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << ncols) - 1);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(c + r * ldc, keep, acc[r]);
}

template <int R>
void q4x16_rows(const uint8_t* panel, int64_t nb, const int8_t* xq, int64_t ldx, const float* xs, const float* xsum,
                float* c, int64_t ldc) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i lo = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = panel + b * 288;
    const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb)));
    __m512i ai[R];
    for (int r = 0; r < R; ++r) ai[r] = _mm512_setzero_si512();
    for (int g = 0; g < 4; ++g) {
      const __m512i raw = _mm512_loadu_si512(pb + 32 + 64 * g);
      const __m512i wl = _mm512_and_si512(raw, lo), wh = _mm512_and_si512(_mm512_srli_epi16(raw, 4), lo);
      for (int r = 0; r < R; ++r) {
        int32_t xl, xh;
        __builtin_memcpy(&xl, xq + r * ldx + 32 * b + 4 * g, 4);
        __builtin_memcpy(&xh, xq + r * ldx + 32 * b + 16 + 4 * g, 4);
        ai[r] = _mm512_dpbusd_epi32(ai[r], wl, _mm512_set1_epi32(xl));
        ai[r] = _mm512_dpbusd_epi32(ai[r], wh, _mm512_set1_epi32(xh));
      }
    }
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_set1_ps(xs[r * nb + b])),
                               _mm512_sub_ps(_mm512_cvtepi32_ps(ai[r]), _mm512_set1_ps(8.0f * xsum[r * nb + b])), acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(c + r * ldc, acc[r]);
}

void q4x16_panel(const uint8_t* panel, int64_t nb, const int8_t* xq, int64_t ldx, const float* xs, const float* xsum,
                 int64_t m, float* c, int64_t ldc) {
  switch (m) {
    case 4: return q4x16_rows<4>(panel, nb, xq, ldx, xs, xsum, c, ldc);
    case 3: return q4x16_rows<3>(panel, nb, xq, ldx, xs, xsum, c, ldc);
    case 2: return q4x16_rows<2>(panel, nb, xq, ldx, xs, xsum, c, ldc);
    default: return q4x16_rows<1>(panel, nb, xq, ldx, xs, xsum, c, ldc);
  }
}

template <int G, bool Mins>
void i8_panel_g(const int8_t* panel, const float* d, const float* wsum, const float* mins, int64_t nb,
                const uint8_t* xu, int64_t ldx, const float* xs, const float* xsum, int64_t m, float* c, int64_t ldc,
                int64_t ncols) {
  with_rows(m, [&](auto rows) {
    i8_panel_rows<decltype(rows)::value, G, Mins>(panel, d, wsum, mins, nb, xu, ldx, xs, xsum, c, ldc, ncols);
  });
}

void i8_panel(const int8_t* panel, const float* d, const float* wsum, const float* mins, int64_t nb, int be,
              const uint8_t* xu, int64_t ldx, const float* xs, const float* xsum, int64_t m, float* c, int64_t ldc,
              int64_t ncols) {
  if (be == 16) return i8_panel_g<4, false>(panel, d, wsum, mins, nb, xu, ldx, xs, xsum, m, c, ldc, ncols);  // Q6_K: no mins
  if (mins) return i8_panel_g<8, true>(panel, d, wsum, mins, nb, xu, ldx, xs, xsum, m, c, ldc, ncols);
  return i8_panel_g<8, false>(panel, d, wsum, mins, nb, xu, ldx, xs, xsum, m, c, ldc, ncols);
}

}  // namespace
}  // namespace rlx::cpu
RLX_ISA_REGION_END()

namespace rlx::cpu {
const QDotKernels* qdot_avx512_kernels() {  // outside the region: callable on any CPU
  static const QDotKernels k = [] {
    QDotKernels v = *qdot_avx2_kernels();
    v.q8_0 = dot_q8_0;
    v.q4_0 = qb_row<quant::kQ4_0>;  // qdot_region_avx512.h
    v.i8_panel = i8_panel;
    v.i8_panel_signed_x = false;  // vpdpbusd: unsigned activations (int8 + 128)
    v.q4x16_panel = q4x16_panel;
    add_kquant_avx512(v);
    return v;
  }();
  return &k;
}
}  // namespace rlx::cpu
