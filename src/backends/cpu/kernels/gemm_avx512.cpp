// AVX-512 kernels: the GEMM table (12x32 microkernel, dot and GEMV from gemm_vec.h, the AVX2
// file's transposing pack, and this file's half widening). Every function carries its own target
// attribute or sits in a target region; the file is compiled for the baseline ISA, and all
// symbols except the table getter have internal linkage, so nothing here can be picked
// by the linker for code that runs on machines without AVX-512.
#if !defined(__clang__)
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_ps().
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cmath>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/row_kernels.h"

#define RLX_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma,f16c")))
#define RLX_AVX512_INLINE RLX_AVX512 inline __attribute__((always_inline))

// The shared kernels (gemm_vec.h: microkernel, dot, GEMV, conv row) over this ISA's traits,
// compiled with the same target as the rest of this file.
RLX_ISA_REGION_BEGIN("avx512f,avx512dq,avx512vl,avx2,fma,f16c")
namespace rlx::cpu::gemm_avx512_vec {
namespace {
#include "backends/cpu/kernels/vec_traits_avx512.h"
using F = V::F;
constexpr int W = V::W;
#include "backends/cpu/kernels/gemm_vec.h"
}  // namespace
}  // namespace rlx::cpu::gemm_avx512_vec
RLX_ISA_REGION_END()


namespace rlx::cpu {
namespace {


constexpr int kMr = 12, kNr = 32;
// The ukr_*_stream tables: the packed-B kernels prefetching the next panel packed once (gemm_vec.h).
constexpr int kStream = gemm_avx512_vec::kPrefetchBPanel;

// The microkernel, dot, GEMV and conv row are the shared ones (gemm_vec.h, in gemm_ISA_vec above).

// Horizontal sum in a fixed order (determinism does not depend on the compiler's choice).

// ---- vector math



RLX_AVX512 void widen(const uint16_t* src, float* dst, int64_t n, bool bf16) {
  int64_t i = 0;
  if (bf16) {
    for (; i + 16 <= n; i += 16) {
      const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
      _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
    }
    for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  } else {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
    for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
  }
}

IsaKernels make_table() {
  IsaKernels t;
  t.isa = Isa::Avx512;
  t.mr = kMr;
  t.nr = kNr;
  t.mc = 144;
  t.kc = 256;
  t.nc = 2048;
  fill_table<kMr>(t.ukr, []<int M>() { return &gemm_avx512_vec::ukr_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_off, []<int M>() { return &gemm_avx512_vec::ukr_off_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_epi, []<int M>() { return &gemm_avx512_vec::ukr_epi_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_half, []<int M>() { return &gemm_avx512_vec::ukr_half_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_off_half, []<int M>() { return &gemm_avx512_vec::ukr_off_half_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_off_epi, []<int M>() { return &gemm_avx512_vec::ukr_off_epi_vec<M, kMr>; });
  fill_table<kMr>(t.ukr_off_half_epi, []<int M>() { return &gemm_avx512_vec::ukr_off_half_epi_vec<M, kMr>; });
  fill_table<8>(t.ukr_cols, []<int N>() { return &gemm_avx512_vec::ukr_cols_vec<N, kMr>; });
  fill_table<14>(t.ukr_arows, []<int M>() { return &gemm_avx512_vec::ukr_arows_vec<M, kMr>; });
  t.arows_max = 14;
  fill_table<kMr>(t.ukr_stream, []<int M>() { return &gemm_avx512_vec::ukr_vec<M, kMr, kStream>; });
  fill_table<kMr>(t.ukr_epi_stream, []<int M>() { return &gemm_avx512_vec::ukr_epi_vec<M, kMr, kStream>; });
  fill_table<kMr>(t.ukr_half_stream, []<int M>() { return &gemm_avx512_vec::ukr_half_vec<M, kMr, kStream>; });
  t.dot = gemm_avx512_vec::dot;
  t.gemv = gemm_avx512_vec::gemv;
  // The 8x8 transpose needs only 256-bit AVX2 ops; every CPU that passes the AVX-512
  // check (which requires AVX2 + FMA) runs the AVX2 table's one.
  t.rows = &row_kernels(t.isa);
  t.transpose_pack = avx2_kernels()->transpose_pack;
  t.widen = widen;
  return t;
}

}  // namespace

const IsaKernels* avx512_kernels() {
  static const IsaKernels table = make_table();
  return &table;
}

}  // namespace rlx::cpu
