// AVX2+FMA kernels: the GEMM table (6x16 microkernel, dot and GEMV from gemm_vec.h) and the
// AVX-specific pieces: the 8x8 transposing pack and half widening. Every function carries its
// own target attribute or sits in a target region; the file is compiled for the baseline ISA, and all
// symbols except the table getter have internal linkage, so nothing here can be picked
// by the linker for code that runs on machines without AVX2.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/row_kernels.h"

#define RLX_AVX2 __attribute__((target("avx2,fma,f16c")))
#define RLX_AVX2_INLINE RLX_AVX2 inline __attribute__((always_inline))

// The shared kernels (gemm_vec.h: microkernel, dot, GEMV, conv row) over this ISA's traits,
// compiled with the same target as the rest of this file.
RLX_ISA_REGION_BEGIN("avx2,fma,f16c")
namespace rlx::cpu::gemm_avx2_vec {
namespace {
#include "backends/cpu/kernels/vec_traits_avx2.h"
using F = V::F;
constexpr int W = V::W;
#include "backends/cpu/kernels/gemm_vec.h"
}  // namespace
}  // namespace rlx::cpu::gemm_avx2_vec
RLX_ISA_REGION_END()


namespace rlx::cpu {
namespace {


constexpr int kMr = 6, kNr = 16;
// The ukr_*_stream tables: the packed-B kernels prefetching the next panel packed once (gemm_vec.h).
constexpr int kStream = gemm_avx2_vec::kPrefetchBPanel;

// The microkernel, dot, GEMV and conv row are the shared ones (gemm_vec.h, in gemm_ISA_vec above).

// 8x8 transposes on AVX registers: rows [r0, r0+8) x k [k0, k0+8) of src become eight
// k-rows of dst. Rows past `rows` read as zero; lanes past `width` are not stored.
RLX_AVX2 void transpose_pack(const float* src, int64_t ld, int64_t rows, int64_t kc, int64_t width, float* dst) {
  const int64_t kv = kc / 8 * 8;
  for (int64_t r0 = 0; r0 < width; r0 += 8) {
    const int64_t lanes = width - r0 < 8 ? width - r0 : 8;
    const __m256i store_mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(int(lanes)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const float* rp[8];
    bool live[8];
    for (int i = 0; i < 8; ++i) {
      live[i] = r0 + i < rows;
      rp[i] = src + (live[i] ? r0 + i : 0) * ld;
    }
    for (int64_t k0 = 0; k0 < kv; k0 += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; ++i) v[i] = live[i] ? _mm256_loadu_ps(rp[i] + k0) : _mm256_setzero_ps();
      const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
      const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
      const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
      const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      const __m256 w[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                           _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                           _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                           _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
      float* d = dst + k0 * width + r0;
      if (lanes == 8) {
        for (int t = 0; t < 8; ++t) _mm256_storeu_ps(d + t * width, w[t]);
      } else {
        for (int t = 0; t < 8; ++t) _mm256_maskstore_ps(d + t * width, store_mask, w[t]);
      }
    }
    for (int64_t k = kv; k < kc; ++k)
      for (int64_t i = 0; i < lanes; ++i) dst[k * width + r0 + i] = live[i] ? rp[i][k] : 0.0f;
  }
}

// ---- vector math



RLX_AVX2 void widen(const uint16_t* src, float* dst, int64_t n, bool bf16) {
  int64_t i = 0;
  if (bf16) {
    for (; i + 8 <= n; i += 8) {
      const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
    }
    for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  } else {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
  }
}

IsaKernels make_table() {
  IsaKernels t;
  t.isa = Isa::Avx2;
  t.mr = kMr;
  t.nr = kNr;
  t.mc = 72;  // measured best on a Xeon (Sapphire/Emerald Rapids) restricted to AVX2
  t.kc = 192;
  t.nc = 2048;
  fill_table<kMr>(t.ukr, []<int M>() { return &gemm_avx2_vec::ukr_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_off, []<int M>() { return &gemm_avx2_vec::ukr_off_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_epi, []<int M>() { return &gemm_avx2_vec::ukr_epi_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_half, []<int M>() { return &gemm_avx2_vec::ukr_half_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_off_half, []<int M>() { return &gemm_avx2_vec::ukr_off_half_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_off_epi, []<int M>() { return &gemm_avx2_vec::ukr_off_epi_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_off_half_epi, []<int M>() { return &gemm_avx2_vec::ukr_off_half_epi_vec<M, kMr>; });
  fill_table<8>(t.ukr_cols, []<int N>() { return &gemm_avx2_vec::ukr_cols_vec<N, kMr>; });
  fill_table<kMr>(t.ukr_arows, []<int M>() { return &gemm_avx2_vec::ukr_arows_vec<M, kMr>; });
  t.arows_max = kMr;
  fill_table<kMr>(t.ukr_stream, []<int M>() { return &gemm_avx2_vec::ukr_vec<M, kMr, kStream>; });
  fill_table<kMr>(t.ukr_epi_stream, []<int M>() { return &gemm_avx2_vec::ukr_epi_vec<M, kMr, kStream>; });
  fill_table<kMr>(t.ukr_half_stream, []<int M>() { return &gemm_avx2_vec::ukr_half_vec<M, kMr, kStream>; });
  t.dot = gemm_avx2_vec::dot;
  t.gemv = gemm_avx2_vec::gemv;
  t.rows = &row_kernels(t.isa);
  t.transpose_pack = transpose_pack;
  t.widen = widen;
  return t;
}

}  // namespace

const IsaKernels* avx2_kernels() {
  static const IsaKernels table = make_table();
  return &table;
}

}  // namespace rlx::cpu
