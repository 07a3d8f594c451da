// Internal: what the AVX-512 qdot kernel files share (qdot_avx512.cpp, qdot_kquant_avx512.cpp).
// Include it inside an AVX-512 VNNI ISA region, within the file's namespace, after <immintrin.h>
// and qdot_region.h (half_at).
#pragma once

// Two 32-element blocks' 16 nibble bytes each (a, b) as the pair's 64 values in element order
// (low nibbles then high, block a then block b): the bytes broadcast into the quarters
// [a, a, b, b] by a broadcast load and a masked one, so no shuffle-port instruction is spent,
// then the second and fourth quarters shifted down a nibble. Q4_0 decode on one thread, weights
// in L2: 16.6 -> 17.3 GMAC/s against inserting two 256-bit halves (medians of 7 alternated runs).
inline __m512i pair_nibbles(const uint8_t* a, const uint8_t* b) {
  __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  v = _mm512_mask_broadcast_i32x4(v, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  return _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFF00FF00u, v, 4), _mm512_set1_epi8(0x0F));
}

// Q4_0 / Q5_0 rows times one activation row (decode), F's blocks as QbLayout lays them out:
// the unsigned values (nibbles, plus 16 where Q5_0's fifth bit is set) straight into vpdpbusd
// two blocks at a time, the offset (8 / 16) taken off as offset x the blocks' scaled activation
// sums. Sixteen blocks a round: their f16 scales gathered and converted in one vector,
// multiplied by the activation scales and spread to block pairs by a permute, so no scalar
// work is left per block; a pair's two 32-bit fifth-bit words are one 64-bit mask. The blocks
// past the last round go a pair at a time with their two scales made in scalar registers,
// cheaper than a masked gather for the few a row has left (Q5_0, one thread, `rlx_bench_qmatmul
// --k K --layers 8 --runs 300 q5_0`, medians of 9 alternated runs: K = 576, SmolLM2's 18-block
// rows, 8.9 -> 10.2 GMAC/s; K = 1184 11.1 -> 14.1); an odd last block's pair has zeros above.
template <uint32_t F>
float qb_row(const uint8_t* w, const float* xs, const int8_t* xq, const float* xsum, int64_t nb) {
  using L = QbLayout<F>;
  static_assert(!L::q8 && !L::has_min && L::offset > 0, "blocks of offset nibbles (Q4_0, Q5_0)");
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), vc = _mm512_setzero_ps();
  const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(L::bytes));
  const __m512i pair_ix = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
  // Blocks 2P and (when `two`) 2P + 1 from p, x from xr, their scales in lanes 2P, 2P + 1 of s.
  auto pair = [&](const uint8_t* p, const int8_t* xr, int P, bool two, __m512 s, __m512& a)
                  __attribute__((always_inline)) {
    const uint8_t* q = p + 2 * L::bytes * P;
    // A lone last block: its bytes in both halves, the upper half (and x's) zeroed, so
    // nothing past the row or the activations is read.
    __m512i v = pair_nibbles(q + L::qs_at, q + (two ? L::bytes : 0) + L::qs_at);
    if (!two) v = _mm512_maskz_mov_epi8(0xFFFFFFFFull, v);
    if constexpr (L::five) {
      uint32_t h0, h1 = 0;
      __builtin_memcpy(&h0, q + L::qh_at, 4);
      if (two) __builtin_memcpy(&h1, q + L::bytes + L::qh_at, 4);
      v = _mm512_mask_add_epi8(v, _cvtu64_mask64(uint64_t(h0) | uint64_t(h1) << 32), v, _mm512_set1_epi8(16));
    }
    const __m512i x = two ? _mm512_loadu_si512(xr + 64 * P) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, xr + 64 * P);
    const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v, x);
    a = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_add_epi32(pair_ix, _mm512_set1_epi32(2 * P)), s),
                        _mm512_cvtepi32_ps(dp), a);
  };
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    const uint8_t* p = w + L::bytes * b;
    const __m512i raw = _mm512_i32gather_epi32(off, p, 1);  // 4 bytes at each block: d first
    const __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)), _mm512_loadu_ps(xs + b));
    vc = _mm512_fmadd_ps(s, _mm512_loadu_ps(xsum + b), vc);
#pragma GCC unroll 4
    for (int P = 0; P < 8; P += 2) {
      pair(p, xq + 32 * b, P, true, s, a0);
      pair(p, xq + 32 * b, P + 1, true, s, a1);
    }
  }
  float corr = _mm512_reduce_add_ps(vc);
  for (; b < nb; b += 2) {
    const uint8_t* p = w + L::bytes * b;
    const bool two = b + 1 < nb;
    const float s0 = half_at(p) * xs[b], s1 = two ? half_at(p + L::bytes) * xs[b + 1] : 0.0f;
    corr += s0 * xsum[b] + (two ? s1 * xsum[b + 1] : 0.0f);
    pair(p, xq + 32 * b, 0, two, _mm512_castps128_ps512(_mm_setr_ps(s0, s1, 0.0f, 0.0f)), a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) - float(L::offset) * corr;
}
