// Row functions for softmax, log_softmax, layer_norm and rms_norm (see norm_rows.h).
// The AVX2 / AVX-512 versions live in functions marked with the target attribute so
// the rest of the build stays at the baseline ISA; the caller picks one at build time.
#include "backends/cpu/kernels/norm_rows.h"

#include <cmath>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RLX_NORM_X86 1
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on _mm512_undefined_*.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu::reduce_movement {
namespace {

// ---- scalar (any float type): 8 lane accumulators in a fixed combine order
template <class A> A lanes_sum(const A* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

template <class A> A row_max(const A* x, int64_t n) {
  A m = -std::numeric_limits<A>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Writes exp(x - m) to y (may alias x) and returns the sum.
template <class A> A exp_sum(const A* x, A* y, int64_t n, A m, bool store) {
  A l[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    const A e = std::exp(x[i] - m);
    if (store) y[i] = e;
    l[i & 7] += e;
  }
  return lanes_sum(l);
}

template <class A> void softmax_scalar(const A* x, A* y, int64_t n) {
  const A m = row_max(x, n);
  const A s = exp_sum(x, y, n, m, true);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] / s;
}

template <class A> void log_softmax_scalar(const A* x, A* y, int64_t n) {
  const A m = row_max(x, n);
  const A ls = std::log(exp_sum(x, y, n, m, false));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
}

template <class A> A row_sum(const A* x, int64_t n, A shift, bool square) {
  A l[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    const A d = x[i] - shift;
    l[i & 7] += square ? d * d : d;
  }
  return lanes_sum(l);
}

template <class A>
void layer_norm_scalar(const A* x, A* y, int64_t n, const A* s, const A* b, A eps) {
  const A mean = row_sum(x, n, A(0), false) / A(n);
  const A var = row_sum(x, n, mean, true) / A(n);
  const A r = A(1) / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) {
    A v = (x[i] - mean) * r;
    if (s) v *= s[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

template <class A> void rms_norm_scalar(const A* x, A* y, int64_t n, const A* s, A eps) {
  const A r = A(1) / std::sqrt(row_sum(x, n, A(0), true) / A(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = s ? x[i] * r * s[i] : x[i] * r;
}

template <class A> NormRows<A> scalar_rows() {
  NormRows<A> r;
  r.softmax = softmax_scalar<A>;
  r.log_softmax = log_softmax_scalar<A>;
  r.layer_norm = layer_norm_scalar<A>;
  r.rms_norm = rms_norm_scalar<A>;
  return r;
}

#ifdef RLX_NORM_X86
// Shared constants of the exp polynomial (Cephes-style range reduction to [-ln2/2, ln2/2]).
constexpr float kExpLo = -87.33654f, kExpHi = 88.02f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

// ================= AVX2 + FMA
#define AVX2 __attribute__((target("avx2,fma")))

AVX2 inline __m256 exp8(__m256 x) {
  const __m256 small = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_set1_ps(kExpHi), _mm256_max_ps(_mm256_set1_ps(kExpLo), x));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(small, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

AVX2 inline float hsum8(__m256 v) {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_add_ps(a, _mm_movehl_ps(a, a));
  a = _mm_add_ss(a, _mm_movehdup_ps(a));
  return _mm_cvtss_f32(a);
}
AVX2 inline float hmax8(__m256 v) {
  __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_max_ps(a, _mm_movehl_ps(a, a));
  a = _mm_max_ss(a, _mm_movehdup_ps(a));
  return _mm_cvtss_f32(a);
}
// Lane mask for the last (n - i) < 8 elements.
AVX2 inline __m256i tail_mask8(int64_t rem) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rem)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// Masked load with `fill` in the inactive lanes.
AVX2 inline __m256 load_tail8(const float* p, __m256i m, float fill) {
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

AVX2 float max_avx2(const float* x, int64_t n) {
  __m256 vm = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
  if (i < n) vm = _mm256_max_ps(vm, load_tail8(x + i, tail_mask8(n - i), -INFINITY));
  return hmax8(vm);
}

AVX2 float exp_sum_avx2(const float* x, float* y, int64_t n, float m, bool store) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    if (store) _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (i < n) {
    const __m256i mk = tail_mask8(n - i);
    const __m256 e = exp8(_mm256_sub_ps(load_tail8(x + i, mk, -INFINITY), vm));
    const __m256 ez = _mm256_and_ps(e, _mm256_castsi256_ps(mk));
    if (store) _mm256_maskstore_ps(y + i, mk, ez);
    acc = _mm256_add_ps(acc, ez);
  }
  return hsum8(acc);
}

// y = (x - shift) * mul [* s] [+ b] - post
AVX2 void affine_avx2(const float* x, float* y, int64_t n, float shift, float mul, const float* s,
                      const float* b, float post = 0.0f) {
  const __m256 vs = _mm256_set1_ps(shift), vr = _mm256_set1_ps(mul), vp = _mm256_set1_ps(post);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs), vr);
    if (s) v = _mm256_mul_ps(v, _mm256_loadu_ps(s + i));
    if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
    if (post != 0.0f) v = _mm256_sub_ps(v, vp);
    _mm256_storeu_ps(y + i, v);
  }
  if (i < n) {
    const __m256i mk = tail_mask8(n - i);
    __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mk), vs), vr);
    if (s) v = _mm256_mul_ps(v, _mm256_maskload_ps(s + i, mk));
    if (b) v = _mm256_add_ps(v, _mm256_maskload_ps(b + i, mk));
    if (post != 0.0f) v = _mm256_sub_ps(v, vp);
    _mm256_maskstore_ps(y + i, mk, v);
  }
}

// Sum of (x - shift) or its square; inactive tail lanes contribute 0.
AVX2 float sum_avx2(const float* x, int64_t n, float shift, bool square) {
  const __m256 vs = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vs);
    acc = square ? _mm256_fmadd_ps(d, d, acc) : _mm256_add_ps(acc, d);
  }
  if (i < n) {
    const __m256i mk = tail_mask8(n - i);
    const __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mk), vs),
                                   _mm256_castsi256_ps(mk));
    acc = square ? _mm256_fmadd_ps(d, d, acc) : _mm256_add_ps(acc, d);
  }
  return hsum8(acc);
}

AVX2 void softmax_avx2(const float* x, float* y, int64_t n) {
  const float m = max_avx2(x, n);
  const float s = exp_sum_avx2(x, y, n, m, true);
  affine_avx2(y, y, n, 0.0f, 1.0f / s, nullptr, nullptr);
}
AVX2 void log_softmax_avx2(const float* x, float* y, int64_t n) {
  const float m = max_avx2(x, n);
  const float ls = std::log(exp_sum_avx2(x, y, n, m, false));
  affine_avx2(x, y, n, m, 1.0f, nullptr, nullptr, ls);
}
AVX2 void layer_norm_avx2(const float* x, float* y, int64_t n, const float* s, const float* b,
                          float eps) {
  const float mean = sum_avx2(x, n, 0.0f, false) / float(n);
  const float var = sum_avx2(x, n, mean, true) / float(n);
  affine_avx2(x, y, n, mean, 1.0f / std::sqrt(var + eps), s, b);
}
AVX2 void rms_norm_avx2(const float* x, float* y, int64_t n, const float* s, float eps) {
  const float ms = sum_avx2(x, n, 0.0f, true) / float(n);
  affine_avx2(x, y, n, 0.0f, 1.0f / std::sqrt(ms + eps), s, nullptr);
}
#undef AVX2

// ================= AVX-512F
#define AVX512 __attribute__((target("avx512f")))

AVX512 inline __m512 exp16(__m512 x) {
  const __mmask16 small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_set1_ps(kExpHi), _mm512_max_ps(_mm512_set1_ps(kExpLo), x));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mov_ps(__mmask16(~small), _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}

AVX512 inline __mmask16 tail_mask16(int64_t rem) { return __mmask16((1u << rem) - 1u); }

AVX512 float max_avx512(const float* x, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vm = ninf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(x + i));
  if (i < n) vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(ninf, tail_mask16(n - i), x + i));
  return _mm512_reduce_max_ps(vm);
}

AVX512 float exp_sum_avx512(const float* x, float* y, int64_t n, float m, bool store) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    if (store) _mm512_storeu_ps(y + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 mk = tail_mask16(n - i);
    const __m512 e = _mm512_maskz_mov_ps(mk, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + i), vm)));
    if (store) _mm512_mask_storeu_ps(y + i, mk, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

AVX512 void affine_avx512(const float* x, float* y, int64_t n, float shift, float mul,
                          const float* s, const float* b, float post = 0.0f) {
  const __m512 vs = _mm512_set1_ps(shift), vr = _mm512_set1_ps(mul), vp = _mm512_set1_ps(post);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = n - i >= 16 ? __mmask16(0xffff) : tail_mask16(n - i);
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + i), vs), vr);
    if (s) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(mk, s + i));
    if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, b + i));
    if (post != 0.0f) v = _mm512_sub_ps(v, vp);
    _mm512_mask_storeu_ps(y + i, mk, v);
  }
}

AVX512 float sum_avx512(const float* x, int64_t n, float shift, bool square) {
  const __m512 vs = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = n - i >= 16 ? __mmask16(0xffff) : tail_mask16(n - i);
    const __m512 d = _mm512_maskz_sub_ps(mk, _mm512_maskz_loadu_ps(mk, x + i), vs);
    acc = square ? _mm512_fmadd_ps(d, d, acc) : _mm512_add_ps(acc, d);
  }
  return _mm512_reduce_add_ps(acc);
}

AVX512 void softmax_avx512(const float* x, float* y, int64_t n) {
  const float m = max_avx512(x, n);
  const float s = exp_sum_avx512(x, y, n, m, true);
  affine_avx512(y, y, n, 0.0f, 1.0f / s, nullptr, nullptr);
}
AVX512 void log_softmax_avx512(const float* x, float* y, int64_t n) {
  const float m = max_avx512(x, n);
  const float ls = std::log(exp_sum_avx512(x, y, n, m, false));
  affine_avx512(x, y, n, m, 1.0f, nullptr, nullptr, ls);
}
AVX512 void layer_norm_avx512(const float* x, float* y, int64_t n, const float* s,
                              const float* b, float eps) {
  const float mean = sum_avx512(x, n, 0.0f, false) / float(n);
  const float var = sum_avx512(x, n, mean, true) / float(n);
  affine_avx512(x, y, n, mean, 1.0f / std::sqrt(var + eps), s, b);
}
AVX512 void rms_norm_avx512(const float* x, float* y, int64_t n, const float* s, float eps) {
  const float ms = sum_avx512(x, n, 0.0f, true) / float(n);
  affine_avx512(x, y, n, 0.0f, 1.0f / std::sqrt(ms + eps), s, nullptr);
}
#undef AVX512
#endif  // RLX_NORM_X86

}  // namespace

const NormRows<float>& norm_rows_f32(Isa isa) {
  static const NormRows<float> scalar = scalar_rows<float>();
#ifdef RLX_NORM_X86
  static const NormRows<float> avx2{softmax_avx2, log_softmax_avx2, layer_norm_avx2, rms_norm_avx2};
  static const NormRows<float> avx512{softmax_avx512, log_softmax_avx512, layer_norm_avx512,
                                      rms_norm_avx512};
  if (isa == Isa::Avx512) return avx512;
  if (isa == Isa::Avx2) return avx2;
#endif
  return scalar;
}

const NormRows<double>& norm_rows_f64() {
  static const NormRows<double> scalar = scalar_rows<double>();
  return scalar;
}

}  // namespace rlx::cpu::reduce_movement
