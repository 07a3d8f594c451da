// Internal: the AVX2 vector-traits struct V (F32 lanes) that the shared vector code
// (vec_math.h, elementwise_vec_impl.h, norm_rows_vec.h) is written over. Include it inside a
// region compiled for AVX2 (see elementwise_avx2.cpp), within the namespace that also
// includes that shared code: it defines `struct V` there.
// No include guard and no includes: it is pasted into a namespace; <immintrin.h> and
// <cstdint> come first in the including file.

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
  // Row reductions and the tail of a row (rem < W lanes), for the row kernels.
  static F zero() { return _mm256_setzero_ps(); }
  static float hsum(F v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
  }
  static float hmax(F v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
  }
  using Tail = __m256i;
  static Tail tail(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rem)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F load_tail(const float* p, Tail t, float fill) {  // `fill` in the inactive lanes
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, t), _mm256_castsi256_ps(t));
  }
  static void store_tail(float* p, Tail t, F v) { _mm256_maskstore_ps(p, t, v); }
  static F zero_inactive(F v, Tail t) { return _mm256_and_ps(v, _mm256_castsi256_ps(t)); }
  // Lanes lo <= l < hi (0 <= lo <= hi <= W).
  static Tail range(int64_t lo, int64_t hi) { return _mm256_andnot_si256(tail(lo), tail(hi)); }
  // fma(a, b, c) in the lanes of t, c elsewhere.
  static F fmadd_tail(F a, F b, F c, Tail t) {
    return _mm256_blendv_ps(c, _mm256_fmadd_ps(a, b, c), _mm256_castsi256_ps(t));
  }
  // Lane l of the result: element 2l of the 2W floats a then b.
  static F even(F a, F b) {
    const __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  // Lane l of the result: element 2l + 1 of the 2W floats a then b.
  static F odd(F a, F b) {
    const __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));  // a1 a3 b1 b3 | a5 a7 b5 b7
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  // Lane 0: the last lane of prev; lane l > 0: lane l - 1 of cur.
  static F shift_in(F cur, F prev) {
    const __m256i rot = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
    return _mm256_blend_ps(_mm256_permutevar8x32_ps(cur, rot), _mm256_permutevar8x32_ps(prev, rot), 0x01);
  }
  // Lane l < W - 1: lane l + 1 of v; lane W - 1: lane 0 of next.
  static F shift_down(F v, F next) {
    const __m256i rot = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0);
    return _mm256_blend_ps(_mm256_permutevar8x32_ps(v, rot), _mm256_permutevar8x32_ps(next, rot), 0x80);
  }
  static F bit_or(F a, F b) { return _mm256_or_ps(a, b); }
  // For c < W, o[c * ld + 0 .. M) = lane c of v[0 .. M) (M = 2 or 4): M vectors stored transposed,
  // a run of M floats per lane (the Winograd output transform's tile rows, channels as lanes).
  template <int M>
  static void store_transposed(const F* v, float* o, int64_t ld) {
    if constexpr (M == 4) {
      const F t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
      const F t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
      // r[m]'s 128-bit lane k: lane 4k + m of the four vectors.
      const F r[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE), _mm256_shuffle_ps(t1, t3, 0x44),
                      _mm256_shuffle_ps(t1, t3, 0xEE)};
      for (int m = 0; m < 4; ++m) {
        _mm_storeu_ps(o + m * ld, _mm256_castps256_ps128(r[m]));
        _mm_storeu_ps(o + (4 + m) * ld, _mm256_extractf128_ps(r[m], 1));
      }
    } else {
      // t[h]'s 128-bit lane k: lanes 4k + 2h and 4k + 2h + 1 of the pair, one in each half.
      const F t[2] = {_mm256_unpacklo_ps(v[0], v[1]), _mm256_unpackhi_ps(v[0], v[1])};
      for (int h = 0; h < 2; ++h) {
        const __m128 q[2] = {_mm256_castps256_ps128(t[h]), _mm256_extractf128_ps(t[h], 1)};
        for (int k = 0; k < 2; ++k) {
          _mm_storel_pi(reinterpret_cast<__m64*>(o + (4 * k + 2 * h) * ld), q[k]);
          _mm_storeh_pi(reinterpret_cast<__m64*>(o + (4 * k + 2 * h + 1) * ld), q[k]);
        }
      }
    }
  }
};
