// AVX-512 kernels: the 12x32 SGEMM microkernel family, the small-M dot kernel, GEMV, packing,
// half widening and the direct-convolution row (the vector math is row_kernels / vec_math.h). Every function
// carries its own target attribute; the file is compiled for the baseline ISA, and all
// symbols except the table getter have internal linkage, so nothing here can be picked
// by the linker for code that runs on machines without AVX-512.
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_ps().
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>

#include "backends/cpu/kernels/gemm.h"

#define RLX_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma,f16c")))
#define RLX_AVX512_INLINE RLX_AVX512 inline __attribute__((always_inline))

// The shared microkernel (gemm_ukr_vec.h) over this ISA's traits, compiled with the same
// target as the rest of this file.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx2,fma,f16c")
#endif
namespace rlx::cpu::gemm_avx512_ukr {
namespace {
#include "backends/cpu/kernels/vec_traits_avx512.h"
using F = V::F;
constexpr int W = V::W;
#include "backends/cpu/kernels/gemm_ukr_vec.h"
}  // namespace
}  // namespace rlx::cpu::gemm_avx512_ukr
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif


namespace rlx::cpu {
namespace {


constexpr int kMr = 12, kNr = 32;

// The microkernel is the shared one (gemm_ukr_vec.h, instantiated in gemm_ISA_ukr above).
template <int M> constexpr GemmMicroKernel ukr = &gemm_avx512_ukr::ukr_vec<M, kMr>;

// Horizontal sum in a fixed order (determinism does not depend on the compiler's choice).
RLX_AVX512_INLINE float hsum(__m512 v) {
  __m256 s = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

template <int M, int N>
RLX_AVX512 void dot_mn(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t rsc, int64_t csc, bool accumulate) {
  __m512 acc[M][N];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t kk = 0;
  for (; kk + 16 <= k; kk += 16) {
    __m512 bv[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) bv[j] = _mm512_loadu_ps(b + j * ldb + kk);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_loadu_ps(a + i * lda + kk);
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  if (kk < k) {
    const __mmask16 mask = __mmask16((1u << (k - kk)) - 1);
    __m512 bv[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) bv[j] = _mm512_maskz_loadu_ps(mask, b + j * ldb + kk);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_maskz_loadu_ps(mask, a + i * lda + kk);
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const float s = hsum(acc[i][j]);
      float& cij = c[i * rsc + j * csc];
      cij = accumulate ? cij + s : s;
    }
}

using DotFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);
template <int M>
constexpr DotFn kDotRow[4] = {dot_mn<M, 1>, dot_mn<M, 2>, dot_mn<M, 3>, dot_mn<M, 4>};
constexpr const DotFn* kDot[4] = {kDotRow<1>, kDotRow<2>, kDotRow<3>, kDotRow<4>};

void dot(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
         float* c, int64_t rsc, int64_t csc, bool accumulate) {
  kDot[m - 1][n - 1](k, a, lda, b, ldb, c, rsc, csc, accumulate);
}

// acc rows live in L1 (w <= 1024 floats each); every B row segment is one contiguous
// run. Each element sums over k in order.
template <int M>
RLX_AVX512 void gemv_m(int64_t w, int64_t k, const float* a, int64_t rsa, int64_t csa, const float* b,
                int64_t ldb, float* acc) {
  const int64_t wv = w / 16 * 16;
  for (int i = 0; i < M; ++i)
    for (int64_t j = 0; j < w; ++j) acc[i * w + j] = 0.0f;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* bk = b + kk * ldb;
    __m512 av[M];
    float as[M];
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      as[i] = a[i * rsa + kk * csa];
      av[i] = _mm512_set1_ps(as[i]);
    }
    int64_t j = 0;
    const float* ahead = bk + 4 * ldb;  // rows are separate pages: prefetch 4 rows ahead
    for (; j + 2 * 16 <= wv; j += 2 * 16) {
      if (kk + 4 < k) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + j), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ahead + j + 16), _MM_HINT_T0);
      }
      const __m512 b0 = _mm512_loadu_ps(bk + j), b1 = _mm512_loadu_ps(bk + j + 16);
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        float* ci = acc + i * w + j;
        _mm512_storeu_ps(ci, _mm512_fmadd_ps(av[i], b0, _mm512_loadu_ps(ci)));
        _mm512_storeu_ps(ci + 16, _mm512_fmadd_ps(av[i], b1, _mm512_loadu_ps(ci + 16)));
      }
    }
    for (; j < wv; j += 16) {
      const __m512 b0 = _mm512_loadu_ps(bk + j);
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) _mm512_storeu_ps(acc + i * w + j, _mm512_fmadd_ps(av[i], b0, _mm512_loadu_ps(acc + i * w + j)));
    }
    for (; j < w; ++j)
      for (int i = 0; i < M; ++i) acc[i * w + j] = std::fma(as[i], bk[j], acc[i * w + j]);
  }
}

void gemv(int64_t m, int64_t w, int64_t k, const float* a, int64_t rsa, int64_t csa, const float* b,
          int64_t ldb, float* acc) {
  switch (m) {
    case 1: return gemv_m<1>(w, k, a, rsa, csa, b, ldb, acc);
    case 2: return gemv_m<2>(w, k, a, rsa, csa, b, ldb, acc);
    case 3: return gemv_m<3>(w, k, a, rsa, csa, b, ldb, acc);
    default: return gemv_m<4>(w, k, a, rsa, csa, b, ldb, acc);
  }
}

// ---- vector math


RLX_AVX512 void conv_row(float* out, int64_t taps, const float* const* src, const float* w, const int64_t* lo,
                    const int64_t* hi, int64_t ilo, int64_t ihi) {
  for (int64_t t = 0; t < taps; ++t) {  // edge columns, tap by tap
    const int64_t e0 = ilo < hi[t] ? ilo : hi[t], e1 = ihi > lo[t] ? ihi : lo[t];
    for (int64_t x = lo[t]; x < e0; ++x) out[x] = std::fma(w[t], src[t][x], out[x]);
    for (int64_t x = e1; x < hi[t]; ++x) out[x] = std::fma(w[t], src[t][x], out[x]);
  }
  // Interior: four independent accumulators (masked at the end) hide the FMA latency.
  for (int64_t x = ilo; x < ihi; x += 64) {
    __mmask16 m[4];
    for (int c = 0; c < 4; ++c) {
      const int64_t lanes = ihi - x - c * 16;
      m[c] = lanes >= 16 ? __mmask16(0xFFFF) : lanes <= 0 ? __mmask16(0) : __mmask16((1u << lanes) - 1);
    }
    __m512 acc[4];
    for (int c = 0; c < 4; ++c) acc[c] = _mm512_maskz_loadu_ps(m[c], out + x + c * 16);
    for (int64_t t = 0; t < taps; ++t) {
      const __m512 wv = _mm512_set1_ps(w[t]);
      for (int c = 0; c < 4; ++c) acc[c] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m[c], src[t] + x + c * 16), acc[c]);
    }
    for (int c = 0; c < 4; ++c) _mm512_mask_storeu_ps(out + x + c * 16, m[c], acc[c]);
  }
}

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
  t.ukr[1] = ukr<1>; t.ukr[2] = ukr<2>; t.ukr[3] = ukr<3>; t.ukr[4] = ukr<4>;
  t.ukr[5] = ukr<5>; t.ukr[6] = ukr<6>; t.ukr[7] = ukr<7>; t.ukr[8] = ukr<8>;
  t.ukr[9] = ukr<9>; t.ukr[10] = ukr<10>; t.ukr[11] = ukr<11>; t.ukr[12] = ukr<12>;
  t.dot = dot;
  t.gemv = gemv;
  // The 8x8 transpose needs only 256-bit AVX2 ops; every CPU that passes the AVX-512
  // check (which requires AVX2 + FMA) runs the AVX2 table's one.
  t.transpose_pack = avx2_kernels()->transpose_pack;
  t.widen = widen;
  t.conv_row = conv_row;
  return t;
}

}  // namespace

const IsaKernels* avx512_kernels() {
  static const IsaKernels table = make_table();
  return &table;
}

}  // namespace rlx::cpu
