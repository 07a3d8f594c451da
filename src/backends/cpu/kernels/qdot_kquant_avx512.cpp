// AVX-512 VNNI block-format dot kernels against int8 activations quantized per 32.
// Q4_K / Q5_K / Q6_K here: 64 weights per register as unsigned bytes, vpdpbusd into 16
// int32 lanes (lanes 0..7 one activation block, 8..15 the next), converted and scaled by a
// per-lane float vector (weight sub-block scale x activation scale) spread from the
// super-block's scales with one permute; the super-block is decoded once for up to 4
// activation rows. Q4_1 / Q5_0 / Q5_1 from qdot_blocks_impl.h with 256-bit vpdpbusd, but
// Q5_0 times one row (decode) by qb_row (qdot_region_avx512.h), two blocks a 512-bit vpdpbusd.
// Layouts: qdot_scalar.cpp.
#include <immintrin.h>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/qdot.h"
#include "rlx/quant.h"

RLX_ISA_REGION_BEGIN("avx512f,avx512dq,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
namespace rlx::cpu {
namespace {

#include "backends/cpu/kernels/qdot_region.h"
#include "backends/cpu/kernels/qdot_region_avx512.h"

inline __m512i dup256(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline __m256 qb_dot(__m256i q, __m256i x) {
  return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, x));
}
inline __m256 qb_sdot(__m256i aw, __m256i w, __m256i x) {
  const __m256i sx = _mm256_mask_sub_epi8(x, _mm256_movepi8_mask(w), _mm256_setzero_si256(), x);
  return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx));
}
inline __m256i qb_bits(uint32_t qh) { return _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(16)); }

#include "backends/cpu/kernels/qdot_blocks_impl.h"

// Lane t of chunk c (64 elements) belongs to activation block 2c + t/8.
inline __m512i block_index(int c) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * c)), _mm256_set1_epi32(2 * c + 1), 1);
}

template <bool Five, int M>
void k4_rows(const uint8_t* w, int64_t nsb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx,
             float* out, int64_t ldo) {
  const int64_t ldb = ldx / 32;
  __m512 acc[M];
  __m256 accm[M];
  for (int r = 0; r < M; ++r) {
    acc[r] = _mm512_setzero_ps();
    accm[r] = _mm256_setzero_ps();
  }
  const __m512i lo4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* blk = w + s * (Five ? 176 : 144);
    uint8_t sc[8], mn[8];
    unpack_scales_k4(blk + 4, sc, mn);
    const __m256 vsc = _mm256_mul_ps(_mm256_set1_ps(half_at(blk)),
                                     _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)))));
    const __m256 vmn = _mm256_mul_ps(_mm256_set1_ps(half_at(blk + 2)),
                                     _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)))));
    __m512 sb[M];  // lanes 0..7: weight scale x activation scale of each sub-block
    for (int r = 0; r < M; ++r) {
      const __m256 xs8 = _mm256_loadu_ps(xs + r * ldb + 8 * s);
      accm[r] = _mm256_fmadd_ps(vmn, _mm256_mul_ps(xs8, _mm256_loadu_ps(xsum + r * ldb + 8 * s)), accm[r]);
      sb[r] = _mm512_castps256_ps512(_mm256_mul_ps(vsc, xs8));
    }
    const uint8_t* qs = blk + (Five ? 48 : 16);
    const __m512i qh = Five ? dup256(blk + 16) : _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      // The 32 bytes in both halves (a broadcast load), the upper half shifted a nibble down.
      const __m512i raw = dup256(qs + 32 * c);
      __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), lo4);
      if (Five) {  // the fifth bit: bit 2c of qh for the low half, bit 2c + 1 for the high half
        const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * c))),
                                                _mm256_set1_epi8(static_cast<char>(2 << (2 * c))), 1);
        q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh, bits), q, sixteen);
      }
      const __m512i idx = block_index(c);
      for (int r = 0; r < M; ++r) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, _mm512_loadu_si512(xq + r * ldx + 256 * s + 64 * c));
        acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, sb[r]), _mm512_cvtepi32_ps(p), acc[r]);
      }
    }
  }
  for (int r = 0; r < M; ++r) out[r * ldo] = _mm512_reduce_add_ps(acc[r]) - V::hsum(accm[r]);
}

// Q6_K: lane t of chunk g (64 elements) has weight scale sc[4g + t/4] and activation
// block 2g + t/8; the offset 32 is removed as 32 * sum(x) from a second vpdpbusd.
template <int M>
void q6k_rows(const uint8_t* w, int64_t nsb, const int8_t* xq, const float* xs, const float*, int64_t ldx, float* out,
              int64_t ldo) {
  const int64_t ldb = ldx / 32;
  __m512 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0F), hi2 = _mm512_set1_epi8(0x30), off = _mm512_set1_epi8(32);
  // Per-half shift counts (16-bit lanes): bits 0-1 / 2-3 of qh for chunk A, 4-5 / 6-7 for B.
  const __m512i shl_a = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr_b = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
  const __m512i quarter = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* blk = w + s * 210;
    const __m512 sc16 = _mm512_mul_ps(
        _mm512_set1_ps(half_at(blk + 208)),
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)))));
    __m512 xs8[M];
    for (int r = 0; r < M; ++r) xs8[r] = _mm512_castps256_ps512(_mm256_loadu_ps(xs + r * ldb + 8 * s));
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk + 64 * h), qh = dup256(blk + 128 + 32 * h);
      const __m512i q[2] = {
          _mm512_or_si512(_mm512_and_si512(ql, lo4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl_a), hi2)),
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4), _mm512_and_si512(_mm512_srlv_epi16(qh, shr_b), hi2))};
      for (int k = 0; k < 2; ++k) {
        const int g = 2 * h + k;
        const __m512 wsc = _mm512_permutexvar_ps(_mm512_add_epi32(quarter, _mm512_set1_epi32(4 * g)), sc16);
        const __m512i idx = block_index(g);
        for (int r = 0; r < M; ++r) {
          const __m512i x = _mm512_loadu_si512(xq + r * ldx + 256 * s + 64 * g);
          const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], x),
                                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, x));
          acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(wsc, _mm512_permutexvar_ps(idx, xs8[r])), _mm512_cvtepi32_ps(p), acc[r]);
        }
      }
    }
  }
  for (int r = 0; r < M; ++r) out[r * ldo] = _mm512_reduce_add_ps(acc[r]);
}

void q5_0(const uint8_t* w, int64_t nb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx, int64_t m,
          float* out, int64_t ldo) {
  if (m == 1) {  // decode: qdot_region_avx512.h's one-row kernel
    *out = qb_row<quant::kQ5_0>(w, xs, xq, xsum, nb);
    return;
  }
  qb<quant::kQ5_0>(w, nb, xq, xs, xsum, ldx, m, out, ldo);
}

template <bool Five>
void k4(const uint8_t* w, int64_t nsb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx, int64_t m,
        float* out, int64_t ldo) {
  with_rows(m, [&](auto r) { k4_rows<Five, decltype(r)::value>(w, nsb, xq, xs, xsum, ldx, out, ldo); });
}

void q6k(const uint8_t* w, int64_t nsb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx, int64_t m,
         float* out, int64_t ldo) {
  with_rows(m, [&](auto r) { q6k_rows<decltype(r)::value>(w, nsb, xq, xs, xsum, ldx, out, ldo); });
}

}  // namespace
}  // namespace rlx::cpu
RLX_ISA_REGION_END()

namespace rlx::cpu {
void add_kquant_avx512(QDotKernels& k) {  // outside the region: callable on any CPU
  k.q8_0_rows = qb<quant::kQ8_0>;
  k.q4_0_rows = qb<quant::kQ4_0>;
  k.q4_1 = qb<quant::kQ4_1>;
  k.q5_0 = q5_0;
  k.q5_1 = qb<quant::kQ5_1>;
  k.q4_k = k4<false>;
  k.q5_k = k4<true>;
  k.q6_k = q6k;
}
}  // namespace rlx::cpu
