// conv_integer's product with AVX-512 VNNI: tiles of 8 rows x 32 columns, 16 int32
// accumulators; per group of 4 bytes, two 64-byte loads of x (u8) and one broadcast of each
// row's 4 weight bytes (s8) feed 16 vpdpbusd.
#include <immintrin.h>

#include "backends/cpu/kernels/conv_integer.h"
#include "backends/cpu/kernels/isa_region.h"

RLX_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni")
namespace rlx::cpu {

void int_gemm_vnni(const int8_t* w4, int64_t k4n, const uint8_t* x4, int64_t nc, int64_t m_pad, int32_t* c) {
  const int64_t wstride = 4 * k4n, xstride = 4 * nc;
  for (int64_t j = 0; j < nc; j += kIntCols)
    for (int64_t m = 0; m < m_pad; m += kIntRows) {
      __m512i acc[kIntRows][2];
      for (auto& r : acc) r[0] = r[1] = _mm512_setzero_si512();
      const uint8_t* xp = x4 + 4 * j;
      const int8_t* wp = w4 + m * wstride;
      for (int64_t g = 0; g < k4n; ++g, xp += xstride) {
        const __m512i x0 = _mm512_loadu_si512(xp), x1 = _mm512_loadu_si512(xp + 64);
        for (int r = 0; r < kIntRows; ++r) {
          int32_t wv;
          __builtin_memcpy(&wv, wp + r * wstride + 4 * g, 4);
          const __m512i wb = _mm512_set1_epi32(wv);
          acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x0, wb);
          acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x1, wb);
        }
      }
      for (int r = 0; r < kIntRows; ++r) {
        _mm512_storeu_si512(c + (m + r) * nc + j, acc[r][0]);
        _mm512_storeu_si512(c + (m + r) * nc + j + 16, acc[r][1]);
      }
    }
}

}  // namespace rlx::cpu
RLX_ISA_REGION_END()
