// Internal: the AVX-512 vector-traits struct V (F32 lanes) that the shared vector code
// (vec_math.h, elementwise_vec_impl.h, norm_rows_vec.h) is written over. Include it inside a
// region compiled for AVX-512 (see elementwise_avx512.cpp), within the namespace that also
// includes that shared code: it defines `struct V` there.
// No include guard and no includes: it is pasted into a namespace; <immintrin.h> and
// <cstdint> come first in the including file.

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
  // Row reductions and the tail of a row (rem < W lanes), for the row kernels.
  static F zero() { return _mm512_setzero_ps(); }
  static float hsum(F v) { return _mm512_reduce_add_ps(v); }
  static float hmax(F v) { return _mm512_reduce_max_ps(v); }
  using Tail = __mmask16;
  static Tail tail(int64_t rem) { return __mmask16((1u << rem) - 1u); }
  // Lanes lo <= l < hi (0 <= lo <= hi <= W).
  static Tail range(int64_t lo, int64_t hi) { return __mmask16(((1u << hi) - 1u) & ~((1u << lo) - 1u)); }
  // fma(a, b, c) in the lanes of t, c elsewhere.
  static F fmadd_tail(F a, F b, F c, Tail t) { return _mm512_mask3_fmadd_ps(a, b, c, t); }
  static F load_tail(const float* p, Tail t, float fill) { return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), t, p); }
  static void store_tail(float* p, Tail t, F v) { _mm512_mask_storeu_ps(p, t, v); }
  static F zero_inactive(F v, Tail t) { return _mm512_maskz_mov_ps(t, v); }
  // Lane l of the result: element 2l of the 2W floats a then b.
  static F even(F a, F b) {
    return _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
  }
  // Lane l of the result: element 2l + 1 of the 2W floats a then b.
  static F odd(F a, F b) {
    return _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
  }
  // Lane 0: the last lane of prev; lane l > 0: lane l - 1 of cur.
  static F shift_in(F cur, F prev) {
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(cur), _mm512_castps_si512(prev), 15));
  }
  // Lane l < W - 1: lane l + 1 of v; lane W - 1: lane 0 of next.
  static F shift_down(F v, F next) {
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(next), _mm512_castps_si512(v), 1));
  }
  static F bit_or(F a, F b) { return _mm512_or_ps(a, b); }
  // For c < W, o[c * ld + 0 .. M) = lane c of v[0 .. M) (M = 2 or 4): M vectors stored transposed,
  // a run of M floats per lane (the Winograd output transform's tile rows, channels as lanes).
  template <int M>
  static void store_transposed(const F* v, float* o, int64_t ld) {
    if constexpr (M == 4) {
      const F t0 = _mm512_unpacklo_ps(v[0], v[1]), t1 = _mm512_unpackhi_ps(v[0], v[1]);
      const F t2 = _mm512_unpacklo_ps(v[2], v[3]), t3 = _mm512_unpackhi_ps(v[2], v[3]);
      // r[m]'s 128-bit lane k: lane 4k + m of the four vectors.
      const F r[4] = {_mm512_shuffle_ps(t0, t2, 0x44), _mm512_shuffle_ps(t0, t2, 0xEE), _mm512_shuffle_ps(t1, t3, 0x44),
                      _mm512_shuffle_ps(t1, t3, 0xEE)};
      for (int m = 0; m < 4; ++m) {
        _mm_storeu_ps(o + (0 + m) * ld, _mm512_extractf32x4_ps(r[m], 0));
        _mm_storeu_ps(o + (4 + m) * ld, _mm512_extractf32x4_ps(r[m], 1));
        _mm_storeu_ps(o + (8 + m) * ld, _mm512_extractf32x4_ps(r[m], 2));
        _mm_storeu_ps(o + (12 + m) * ld, _mm512_extractf32x4_ps(r[m], 3));
      }
    } else {
      // t[h]'s 128-bit lane k: lanes 4k + 2h and 4k + 2h + 1 of the pair, one in each half.
      const F t[2] = {_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1])};
      for (int h = 0; h < 2; ++h) {
        const __m128 q[4] = {_mm512_extractf32x4_ps(t[h], 0), _mm512_extractf32x4_ps(t[h], 1),
                             _mm512_extractf32x4_ps(t[h], 2), _mm512_extractf32x4_ps(t[h], 3)};
        for (int k = 0; k < 4; ++k) {
          _mm_storel_pi(reinterpret_cast<__m64*>(o + (4 * k + 2 * h) * ld), q[k]);
          _mm_storeh_pi(reinterpret_cast<__m64*>(o + (4 * k + 2 * h + 1) * ld), q[k]);
        }
      }
    }
  }
};
