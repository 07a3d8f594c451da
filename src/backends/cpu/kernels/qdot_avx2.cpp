// AVX2 (+FMA, F16C) dot kernels of qmatmul: int8 x int8 block products through
// maddubs with the sign trick (|w| as u8 times x with w's sign), f16 rows widened by F16C.
#include <immintrin.h>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/qdot.h"

RLX_ISA_REGION_BEGIN("avx2,fma,f16c")
namespace rlx::cpu {
namespace {

#include "backends/cpu/kernels/qdot_region.h"

// Sum over the 32 lanes of w (int8) * x (int8), as 8 int32 lanes converted to float.
inline __m256 dot32(__m256i w, __m256i x) {
  const __m256i aw = _mm256_sign_epi8(w, w);
  const __m256i sx = _mm256_sign_epi8(x, w);
  const __m256i p16 = _mm256_maddubs_epi16(aw, sx);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

// Four blocks per step into four accumulators: the FMA chains are independent, so the
// loop runs at load throughput instead of FMA latency.
float dot_q8_0(const uint8_t* w, const float* xs, const int8_t* xq, int64_t nb) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t b = 0;
  auto step = [&](int64_t bi, __m256& a) {
    const uint8_t* blk = w + 34 * bi;
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * bi));
    a = _mm256_fmadd_ps(_mm256_set1_ps(half_at(blk) * xs[bi]), dot32(wq, q), a);
  };
  for (; b + 4 <= nb; b += 4) {
    step(b, acc[0]);
    step(b + 1, acc[1]);
    step(b + 2, acc[2]);
    step(b + 3, acc[3]);
  }
  for (; b < nb; ++b) step(b, acc[0]);
  return V::hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

// Nibbles as u8 times x as s8 (maddubs needs no sign trick), then - 8 * sum(x) per block.
float dot_q4_0(const uint8_t* w, const float* xs, const int8_t* xq, const float* xsum, int64_t nb) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const __m256i lo = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  float corr = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + 18 * b;
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m256i wq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), lo);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * b));
    const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(wq, q), ones));
    const float sc = half_at(blk) * xs[b];
    acc[b & 1] = _mm256_fmadd_ps(_mm256_set1_ps(sc), dot, acc[b & 1]);
    corr += sc * xsum[b];
  }
  return V::hsum(_mm256_add_ps(acc[0], acc[1])) - 8.0f * corr;
}

float dot_f16(const uint16_t* w, const float* x, int64_t k) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))),
                         _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8))),
                         _mm256_loadu_ps(x + i + 8), a1);
  }
  float s = V::hsum(_mm256_add_ps(a0, a1));
  for (; i < k; ++i) s += _cvtsh_ss(w[i]) * x[i];
  return s;
}

float dot_f32(const float* w, const float* x, int64_t k) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
  }
  float s = V::hsum(_mm256_add_ps(a0, a1));
  for (; i < k; ++i) s += w[i] * x[i];
  return s;
}

void axpy_f16(float a, const uint16_t* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))),
                                            _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * _cvtsh_ss(x[i]);
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

// The int8 panel GEMM (QDotKernels::i8_panel, i8_panel_signed_x): the 16 panel rows as two
// 8-lane halves, each group of 4 elements one maddubs + madd per half and activation row (the
// weights' absolute values once per group), then per block one float scale product a lane.
// R <= 2 activation rows a pass keeps the 4 int32 and 4 float accumulators in registers.
template <int R, int G, bool Mins>
void i8_panel_rows(const int8_t* panel, const float* d, const float* mins, int64_t nb, const int8_t* xq, int64_t ldx,
                   const float* xs, const float* xsum, float* c, int64_t ldc, int64_t ncols) {
  static_assert(!Mins || G == 8, "mins are per 32 elements: blocks of 32 only");
  const int64_t ldb = ldx / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i ai[R][2];
    for (int r = 0; r < R; ++r) ai[r][0] = ai[r][1] = _mm256_setzero_si256();
    const int8_t* pb = panel + b * 64 * G;
    for (int g = 0; g < G; ++g) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 64 * g));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 64 * g + 32));
      const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
      for (int r = 0; r < R; ++r) {
        int32_t x4;
        __builtin_memcpy(&x4, xq + r * ldx + 4 * G * b + 4 * g, 4);
        const __m256i xv = _mm256_set1_epi32(x4);
        ai[r][0] = _mm256_add_epi32(ai[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(xv, w0)), ones));
        ai[r][1] = _mm256_add_epi32(ai[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(xv, w1)), ones));
      }
    }
    const int64_t bx = b * G / 8;
    const __m256 d0 = _mm256_loadu_ps(d + 16 * b), d1 = _mm256_loadu_ps(d + 16 * b + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 sx = _mm256_set1_ps(xs[r * ldb + bx]);
      acc[r][0] = _mm256_fmadd_ps(_mm256_mul_ps(d0, sx), _mm256_cvtepi32_ps(ai[r][0]), acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(_mm256_mul_ps(d1, sx), _mm256_cvtepi32_ps(ai[r][1]), acc[r][1]);
    }
    if constexpr (Mins) {
      const __m256 m0 = _mm256_loadu_ps(mins + 16 * b), m1 = _mm256_loadu_ps(mins + 16 * b + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 u = _mm256_set1_ps(xs[r * ldb + b] * xsum[r * ldb + b]);
        acc[r][0] = _mm256_fmadd_ps(m0, u, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(m1, u, acc[r][1]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[r][0]);
    _mm256_store_ps(out + 8, acc[r][1]);
    for (int64_t j = 0; j < ncols && j < 16; ++j) c[r * ldc + j] = out[j];
  }
}

template <int G, bool Mins>
void i8_panel_g(const int8_t* panel, const float* d, const float* mins, int64_t nb, const int8_t* xq, int64_t ldx,
                const float* xs, const float* xsum, int64_t m, float* c, int64_t ldc, int64_t ncols) {
  const int64_t ldb = ldx / 32;
  for (int64_t r = 0; r < m; r += 2) {
    if (m - r >= 2)
      i8_panel_rows<2, G, Mins>(panel, d, mins, nb, xq + r * ldx, ldx, xs + r * ldb, xsum + r * ldb, c + r * ldc, ldc, ncols);
    else
      i8_panel_rows<1, G, Mins>(panel, d, mins, nb, xq + r * ldx, ldx, xs + r * ldb, xsum + r * ldb, c + r * ldc, ldc, ncols);
  }
}

void i8_panel(const int8_t* panel, const float* d, const float*, const float* mins, int64_t nb, int be,
              const uint8_t* xu, int64_t ldx, const float* xs, const float* xsum, int64_t m, float* c, int64_t ldc,
              int64_t ncols) {
  const int8_t* xq = reinterpret_cast<const int8_t*>(xu);  // signed: i8_panel_signed_x
  if (be == 16) return i8_panel_g<4, false>(panel, d, mins, nb, xq, ldx, xs, xsum, m, c, ldc, ncols);  // Q6_K: no mins
  if (mins) return i8_panel_g<8, true>(panel, d, mins, nb, xq, ldx, xs, xsum, m, c, ldc, ncols);
  return i8_panel_g<8, false>(panel, d, mins, nb, xq, ldx, xs, xsum, m, c, ldc, ncols);
}

}  // namespace
}  // namespace rlx::cpu
RLX_ISA_REGION_END()

namespace rlx::cpu {
const QDotKernels* qdot_avx2_kernels() {  // outside the region: callable on any CPU
  static const QDotKernels k = [] {
    QDotKernels v{.q8_0 = dot_q8_0, .q4_0 = dot_q4_0, .f16 = dot_f16, .f32 = dot_f32, .axpy_f16 = axpy_f16, .axpy_f32 = axpy_f32};
    v.i8_panel = i8_panel;
    v.i8_panel_signed_x = true;
    add_kquant_avx2(v);
    return v;
  }();
  return &k;
}
}  // namespace rlx::cpu
