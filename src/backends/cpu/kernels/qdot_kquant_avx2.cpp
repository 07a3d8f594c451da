// AVX2 block-format dot kernels (Q4_K, Q5_K, Q6_K here; Q4_1 / Q5_0 / Q5_1 from
// qdot_blocks_impl.h) against int8 activations quantized per 32):
// per 32-element activation block the unsigned weight values (4, 5 or 6 bits) multiply the
// int8 activations through maddubs (no sign trick needed: the weights are unsigned), the
// block's int32 sum scales by one float (weight sub-block scale x activation scale). The
// weight super-block is decoded once for up to 4 activation rows. Layouts: qdot_scalar.cpp.
#include <immintrin.h>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/qdot.h"
#include "rlx/quant.h"

RLX_ISA_REGION_BEGIN("avx2,fma,f16c")
namespace rlx::cpu {
namespace {

#include "backends/cpu/kernels/qdot_region.h"

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline __m256 u8s8_dot(__m256i q, __m256i x) {  // 8 float lanes of sum(q * x) over 4-element groups
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1)));
}

inline __m256 qb_dot(__m256i q, __m256i x) { return u8s8_dot(q, x); }
inline __m256 qb_sdot(__m256i aw, __m256i w, __m256i x) { return u8s8_dot(aw, _mm256_sign_epi8(x, w)); }
inline __m256i qb_bits(uint32_t qh) {  // byte e <- bit e: bytes of qh spread 8 ways, tested per bit
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel), _mm256_set1_epi8(16));
}

#include "backends/cpu/kernels/qdot_blocks_impl.h"

// Q4_K / Q5_K: the 8 sub-blocks of 32 coincide with the 8 activation blocks of the super-block.
template <bool Five, int M>
void k4_rows(const uint8_t* w, int64_t nsb, const int8_t* xq, const float* xs, const float* xsum, int64_t ldx,
             float* out, int64_t ldo) {
  const int64_t ldb = ldx / 32;
  __m256 acc[M], accm[M];
  for (int r = 0; r < M; ++r) acc[r] = accm[r] = _mm256_setzero_ps();
  const __m256i lo4 = _mm256_set1_epi8(0x0F), sixteen = _mm256_set1_epi8(16);
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* blk = w + s * (Five ? 176 : 144);
    uint8_t sc[8], mn[8];
    unpack_scales_k4(blk + 4, sc, mn);
    const __m256 vsc = _mm256_mul_ps(_mm256_set1_ps(half_at(blk)),
                                     _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)))));
    const __m256 vmn = _mm256_mul_ps(_mm256_set1_ps(half_at(blk + 2)),
                                     _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)))));
    alignas(32) float sb[M][8];  // per row: weight scale x activation scale of each sub-block
    for (int r = 0; r < M; ++r) {
      const __m256 xs8 = _mm256_loadu_ps(xs + r * ldb + 8 * s);
      accm[r] = _mm256_fmadd_ps(vmn, _mm256_mul_ps(xs8, _mm256_loadu_ps(xsum + r * ldb + 8 * s)), accm[r]);
      _mm256_store_ps(sb[r], _mm256_mul_ps(vsc, xs8));
    }
    const uint8_t* qs = blk + (Five ? 48 : 16);
    const __m256i qh = Five ? load32(blk + 16) : _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i raw = load32(qs + 32 * c);
      __m256i ql = _mm256_and_si256(raw, lo4), qu = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lo4);
      if (Five) {
        const __m256i bl = _mm256_set1_epi8(static_cast<char>(1 << (2 * c))), bu = _mm256_set1_epi8(static_cast<char>(2 << (2 * c)));
        ql = _mm256_or_si256(ql, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), sixteen));
        qu = _mm256_or_si256(qu, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bu), bu), sixteen));
      }
      for (int r = 0; r < M; ++r) {
        const int8_t* x = xq + r * ldx + 256 * s + 64 * c;
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(sb[r][2 * c]), u8s8_dot(ql, load32(x)), acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(sb[r][2 * c + 1]), u8s8_dot(qu, load32(x + 32)), acc[r]);
      }
    }
  }
  for (int r = 0; r < M; ++r) out[r * ldo] = V::hsum(acc[r]) - V::hsum(accm[r]);
}

// Q6_K: sub-blocks of 16, so an activation block spans two weight scales; the 16-bit pair
// sums are scaled by them in the madd (exact in int32), offset 32 removed in 16 bits first.
template <int M>
void q6k_rows(const uint8_t* w, int64_t nsb, const int8_t* xq, const float* xs, const float*, int64_t ldx, float* out,
              int64_t ldo) {
  const int64_t ldb = ldx / 32;
  __m256 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i lo4 = _mm256_set1_epi8(0x0F), hi2 = _mm256_set1_epi8(0x30), off = _mm256_set1_epi8(32);
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* blk = w + s * 210;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = half_at(blk + 208);
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load32(blk + 64 * h), l1 = load32(blk + 64 * h + 32), qh = load32(blk + 128 + 32 * h);
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, lo4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), hi2)),
          _mm256_or_si256(_mm256_and_si256(l1, lo4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), hi2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4), _mm256_and_si256(qh, hi2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), hi2))};
      for (int part = 0; part < 4; ++part) {
        const int b = 4 * h + part;  // activation block within the super-block
        const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[2 * b + 1]), _mm_set1_epi16(sc[2 * b]));
        for (int r = 0; r < M; ++r) {
          const __m256i x = load32(xq + r * ldx + 256 * s + 32 * b);
          const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q[part], x), _mm256_maddubs_epi16(off, x));
          acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * xs[r * ldb + 8 * s + b]),
                                   _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, scv)), acc[r]);
        }
      }
    }
  }
  for (int r = 0; r < M; ++r) out[r * ldo] = V::hsum(acc[r]);
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
void add_kquant_avx2(QDotKernels& k) {  // outside the region: callable on any CPU
  k.q8_0_rows = qb<quant::kQ8_0>;
  k.q4_0_rows = qb<quant::kQ4_0>;
  k.q4_1 = qb<quant::kQ4_1>;
  k.q5_0 = qb<quant::kQ5_0>;
  k.q5_1 = qb<quant::kQ5_1>;
  k.q4_k = k4<false>;
  k.q5_k = k4<true>;
  k.q6_k = q6k;
}
}  // namespace rlx::cpu
