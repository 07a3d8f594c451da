// conv_integer's product with AVX2: tiles of 2 rows x 16 columns. x (u8) and each row's 4
// weight bytes (s8) are widened to int16 and multiplied in pairs by vpmaddwd, so no product
// saturates (vpmaddubsw's int16 sums could); each column keeps two partial sums that are
// added at the end.
#include <immintrin.h>

#include "backends/cpu/kernels/conv_integer.h"
#include "backends/cpu/kernels/isa_region.h"

RLX_ISA_REGION_BEGIN("avx2")
namespace rlx::cpu {

namespace {

// [c0, c1, ..., c7] from two vectors of per-column pairs (cols 0-3 and 4-7).
inline __m256i pair_sums(__m256i lo, __m256i hi) {
  return _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8);
}

}  // namespace

void int_gemm_avx2(const int8_t* w4, int64_t k4n, const uint8_t* x4, int64_t nc, int64_t m_pad, int32_t* c) {
  constexpr int kRows = 2;
  const int64_t wstride = 4 * k4n, xstride = 4 * nc;
  for (int64_t j = 0; j < nc; j += 16)
    for (int64_t m = 0; m < m_pad; m += kRows) {
      __m256i acc[kRows][4];
      for (auto& r : acc)
        for (auto& a : r) a = _mm256_setzero_si256();
      const uint8_t* xp = x4 + 4 * j;
      const int8_t* wp = w4 + m * wstride;
      for (int64_t g = 0; g < k4n; ++g, xp += xstride) {
        __m256i x[4];
        for (int q = 0; q < 4; ++q)
          x[q] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xp + 16 * q)));
        for (int r = 0; r < kRows; ++r) {
          int32_t wv;
          __builtin_memcpy(&wv, wp + r * wstride + 4 * g, 4);
          const __m256i wb = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_set1_epi32(wv)));
          for (int q = 0; q < 4; ++q) acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(x[q], wb));
        }
      }
      for (int r = 0; r < kRows; ++r) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + (m + r) * nc + j), pair_sums(acc[r][0], acc[r][1]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + (m + r) * nc + j + 8), pair_sums(acc[r][2], acc[r][3]));
      }
    }
}

}  // namespace rlx::cpu
RLX_ISA_REGION_END()
