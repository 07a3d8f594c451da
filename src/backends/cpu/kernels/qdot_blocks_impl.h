// Internal: the row kernels of the 32-element block formats (QDotKernels::BlockDot):
// Q4_0, Q4_1, Q5_0, Q5_1 (unsigned values) and Q8_0 (signed), written once and compiled
// inside each ISA region (qdot_kquant_avx2.cpp, qdot_kquant_avx512.cpp). The including
// file defines, before the include:
//   __m256 qb_dot(__m256i q, __m256i x)   -- 8 float lanes of sum(q * x), q u8, x s8;
//   __m256 qb_sdot(__m256i aw, __m256i w, __m256i x)
//                                          -- the same for signed w (aw = |w| as u8, x s8);
//   __m256i qb_bits(uint32_t qh)          -- byte e = 16 where bit e of qh is set, else 0;
// Block layouts: QbLayout (qdot.h).
#pragma once

#include "backends/cpu/kernels/qdot_region.h"  // half_at, V::hsum

// One block's 32 unsigned values as bytes.
template <uint32_t F>
inline __m256i qb_values(const uint8_t* blk) {
  using L = QbLayout<F>;
  const __m128i lo4 = _mm_set1_epi8(0x0F);
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + L::qs_at));
  __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), lo4), _mm_and_si128(raw, lo4));
  if (L::five) {
    uint32_t qh;
    __builtin_memcpy(&qh, blk + L::qh_at, 4);
    q = _mm256_or_si256(q, qb_bits(qh));
  }
  return q;
}

// Per block and row, all in vector lanes (no scalar chain): the 8 lanes of the int dot,
// plus the min / offset term spread over them (xsum / 8 per lane: exact, xsum is a small
// integer), times the scales. Blocks alternate between two accumulators so consecutive
// FMAs do not wait on each other.
template <uint32_t F, int M>
void qb_rows(const uint8_t* w, int64_t nb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx,
             float* out, int64_t ldo) {
  using L = QbLayout<F>;
  const int64_t ldb = ldx / 32;
  __m256 acc0[M], acc1[M];
  for (int r = 0; r < M; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  auto step = [&](int64_t b, __m256* a) __attribute__((always_inline)) {
    const uint8_t* blk = w + b * L::bytes;
    const float dh = half_at(blk);
    const __m256 d = _mm256_set1_ps(dh);
    if constexpr (L::q8) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
      const __m256i aw = _mm256_abs_epi8(wv);
      for (int r = 0; r < M; ++r) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * ldx + 32 * b));
        a[r] = _mm256_fmadd_ps(_mm256_set1_ps(dh * xs[r * ldb + b]), qb_sdot(aw, wv, x), a[r]);
      }
    } else {
      const float mterm = L::has_min ? half_at(blk + 2) : -L::offset * dh;  // the min, or the offset
      const __m256i q = qb_values<F>(blk);
      for (int r = 0; r < M; ++r) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * ldx + 32 * b));
        const __m256 t = _mm256_fmadd_ps(d, qb_dot(q, x), _mm256_set1_ps(mterm * 0.125f * xsum[r * ldb + b]));
        a[r] = _mm256_fmadd_ps(_mm256_set1_ps(xs[r * ldb + b]), t, a[r]);
      }
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    step(b, acc0);
    step(b + 1, acc1);
  }
  if (b < nb) step(b, acc0);
  for (int r = 0; r < M; ++r) out[r * ldo] = V::hsum(_mm256_add_ps(acc0[r], acc1[r]));
}

template <uint32_t F>
void qb(const uint8_t* w, int64_t nb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx, int64_t m,
        float* out, int64_t ldo) {
  with_rows(m, [&](auto r) { qb_rows<F, decltype(r)::value>(w, nb, xq, xs, xsum, ldx, out, ldo); });
}
