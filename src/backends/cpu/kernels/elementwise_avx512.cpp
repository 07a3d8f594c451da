// AVX-512 (F, BW, DQ, VL) F32 spans. Only this file's functions carry the AVX-512 target; they are
// reached only through f32_vec_table_avx512(), which callers use when detect_isa() says
// the CPU has AVX-512 (the rest of the binary stays baseline x86-64).
#include "backends/cpu/kernels/elementwise_types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")
// GCC 12 reports its own _mm512_undefined_ps() as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu::ew::avx512_impl {
namespace {
struct V {
  using F = __m512;
  using M = __mmask16;
  static constexpr int W = 16;
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }   // a*b + c
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); } // c - a*b
  static F fmsub(F a, F b, F c) { return _mm512_fmsub_ps(a, b, c); }   // a*b - c
  static F max(F a, F b) { return _mm512_max_ps(a, b); }  // b when either is NaN
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F clamp(F x, float lo, float hi) { return min(set1(hi), max(set1(lo), x)); }
  static F round(F x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // scalef computes p * 2^n with one rounding, including subnormal results and overflow.
  static F scale_pow2(F p, F n) { return _mm512_scalef_ps(p, n); }
  static void split_exp(F x, F& m, F& e) {  // x = m * 2^e, m in [1, 2); x normal, > 0
    e = _mm512_getexp_ps(x);
    m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
  }
  static F neg(F x) { return _mm512_xor_ps(x, set1(-0.0f)); }
  static F abs(F x) { return _mm512_abs_ps(x); }
  static F copysign(F mag, F s) {
    const F m = set1(-0.0f);
    return _mm512_or_ps(_mm512_andnot_ps(m, mag), _mm512_and_ps(m, s));
  }
  static F sqrt(F x) { return _mm512_sqrt_ps(x); }
  static M lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M le(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
  static M isnan(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static F select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
};
}  // namespace
}  // namespace rlx::cpu::ew::avx512_impl

#define RLX_VEC_NS avx512_impl
#include "backends/cpu/kernels/elementwise_vec_impl.h"
#undef RLX_VEC_NS

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace rlx::cpu::ew {
const F32VecTable& f32_vec_table_avx512() {
  static const F32VecTable table = [] {
    F32VecTable t;
    avx512_impl::fill_table(t);
    // AVX-512 CPUs have AVX2: reuse its half-precision converters.
    const F32VecTable& v2 = f32_vec_table_avx2();
    for (int i = 0; i < kNumDTypes; ++i) {
      t.to_f32[i] = v2.to_f32[i];
      t.from_f32[i] = v2.from_f32[i];
    }
    return t;
  }();
  return table;
}
}  // namespace rlx::cpu::ew

#else  // no x86-64: no vector table (detect_isa() never reports AVX-512 there)
namespace rlx::cpu::ew {
const F32VecTable& f32_vec_table_avx512() {
  static const F32VecTable table;
  return table;
}
}  // namespace rlx::cpu::ew
#endif
