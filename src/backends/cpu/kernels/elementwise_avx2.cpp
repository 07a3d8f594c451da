// AVX2 + FMA F32 spans. Only this file's functions carry the AVX2 target; they are
// reached only through f32_vec_table_avx2(), which callers use when detect_isa() says
// the CPU has AVX2 (the rest of the binary stays baseline x86-64).
#include "backends/cpu/kernels/elementwise_types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace rlx::cpu::ew::avx2_impl {
namespace {
struct V {
  using F = __m256;
  using M = __m256;
  static constexpr int W = 8;
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }   // a*b + c
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); } // c - a*b
  static F fmsub(F a, F b, F c) { return _mm256_fmsub_ps(a, b, c); }   // a*b - c
  static F max(F a, F b) { return _mm256_max_ps(a, b); }  // b when either is NaN
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F clamp(F x, float lo, float hi) { return min(set1(hi), max(set1(lo), x)); }
  static F round(F x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F pow2(__m256i e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  }
  static F scale_pow2(F p, F n) {  // p * 2^n for integral n in [-150, 128]
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    return mul(mul(p, pow2(n1)), pow2(_mm256_sub_epi32(ni, n1)));
  }
  static void split_exp(F x, F& m, F& e) {  // x = m * 2^e, m in [1, 2); x normal, > 0
    const __m256i b = _mm256_castps_si256(x);
    e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b, 23), _mm256_set1_epi32(127)));
    m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi32(0x007fffff)),
                                            _mm256_set1_epi32(0x3f800000)));
  }
  static F neg(F x) { return _mm256_xor_ps(x, set1(-0.0f)); }
  static F abs(F x) { return _mm256_andnot_ps(set1(-0.0f), x); }
  static F copysign(F mag, F s) {
    const F m = set1(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(m, mag), _mm256_and_ps(m, s));
  }
  static F sqrt(F x) { return _mm256_sqrt_ps(x); }
  static M lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M le(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
  static M isnan(F a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static F select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
};
}  // namespace
}  // namespace rlx::cpu::ew::avx2_impl

namespace rlx::cpu::ew::avx2_impl {
namespace {
// Half-precision block converters (F16C for f16; integer rounding for bf16). Tails use
// the scalar conversions, which round identically.
void f16_to_f32(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const uint16_t*>(src);
  auto d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = half_to_float(s[i]);
}
void f32_to_f16(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const float*>(src);
  auto d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) d[i] = float_to_half(s[i]);
}
void bf16_to_f32(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const uint16_t*>(src);
  auto d = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(w, 16));
  }
  for (; i < n; ++i) d[i] = bhalf_to_float(s[i]);
}
void f32_to_bf16(const void* src, void* dst, int64_t n) {
  auto s = static_cast<const float*>(src);
  auto d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(s + i);
    const __m256i b = _mm256_castps_si256(x);
    const __m256i hi = _mm256_srli_epi32(b, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, bias), _mm256_and_si256(hi, one)), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), nan);
    // packus works per 128-bit lane: fix the order with a cross-lane permute.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) d[i] = float_to_bhalf(s[i]);
}
void fill_converters(F32VecTable& t) {
  t.to_f32[size_t(DType::F16)] = &f16_to_f32;
  t.to_f32[size_t(DType::BF16)] = &bf16_to_f32;
  t.from_f32[size_t(DType::F16)] = &f32_to_f16;
  t.from_f32[size_t(DType::BF16)] = &f32_to_bf16;
}
}  // namespace
}  // namespace rlx::cpu::ew::avx2_impl

#define RLX_VEC_NS avx2_impl
#include "backends/cpu/kernels/elementwise_vec_impl.h"
#undef RLX_VEC_NS

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace rlx::cpu::ew {
const F32VecTable& f32_vec_table_avx2() {
  static const F32VecTable table = [] {
    F32VecTable t;
    avx2_impl::fill_table(t);
    avx2_impl::fill_converters(t);
    return t;
  }();
  return table;
}
}  // namespace rlx::cpu::ew

#else  // no x86-64: no vector table (detect_isa() never reports AVX2 there)
namespace rlx::cpu::ew {
const F32VecTable& f32_vec_table_avx2() {
  static const F32VecTable table;
  return table;
}
}  // namespace rlx::cpu::ew
#endif
