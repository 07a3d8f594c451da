// AVX2+FMA kernels: the 6x16 SGEMM microkernel family, the small-M dot kernel, GEMV, packing,
// half widening and the direct-convolution row (the vector math is row_kernels / vec_math.h). Every function
// carries its own target attribute; the file is compiled for the baseline ISA, and all
// symbols except the table getter have internal linkage, so nothing here can be picked
// by the linker for code that runs on machines without AVX2.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/gemm.h"

#define RLX_AVX2 __attribute__((target("avx2,fma,f16c")))
#define RLX_AVX2_INLINE RLX_AVX2 inline __attribute__((always_inline))

// The shared microkernel (gemm_ukr_vec.h) over this ISA's traits, compiled with the same
// target as the rest of this file.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace rlx::cpu::gemm_avx2_ukr {
namespace {
#include "backends/cpu/kernels/vec_traits_avx2.h"
using F = V::F;
constexpr int W = V::W;
#include "backends/cpu/kernels/gemm_ukr_vec.h"
}  // namespace
}  // namespace rlx::cpu::gemm_avx2_ukr
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif


namespace rlx::cpu {
namespace {


constexpr int kMr = 6, kNr = 16;

// The microkernel is the shared one (gemm_ukr_vec.h, instantiated in gemm_ISA_ukr above).
template <int M> constexpr GemmMicroKernel ukr = &gemm_avx2_ukr::ukr_vec<M, kMr>;

// Horizontal sum in a fixed order.
RLX_AVX2_INLINE float hsum(__m256 v) {
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// Lane mask with the first r (0..8) lanes set.
RLX_AVX2_INLINE __m256i tail_mask(int64_t r) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(r)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int M, int N>
RLX_AVX2 void dot_mn(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                     float* c, int64_t rsc, int64_t csc, bool accumulate) {
  __m256 acc[M][N];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t kk = 0;
  for (; kk + 8 <= k; kk += 8) {
    __m256 bv[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) bv[j] = _mm256_loadu_ps(b + j * ldb + kk);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const __m256 av = _mm256_loadu_ps(a + i * lda + kk);
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  if (kk < k) {
    const __m256i mask = tail_mask(k - kk);
    __m256 bv[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) bv[j] = _mm256_maskload_ps(b + j * ldb + kk, mask);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const __m256 av = _mm256_maskload_ps(a + i * lda + kk, mask);
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
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
RLX_AVX2 void gemv_m(int64_t w, int64_t k, const float* a, int64_t rsa, int64_t csa, const float* b,
                int64_t ldb, float* acc) {
  const int64_t wv = w / 8 * 8;
  for (int i = 0; i < M; ++i)
    for (int64_t j = 0; j < w; ++j) acc[i * w + j] = 0.0f;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* bk = b + kk * ldb;
    __m256 av[M];
    float as[M];
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      as[i] = a[i * rsa + kk * csa];
      av[i] = _mm256_set1_ps(as[i]);
    }
    int64_t j = 0;
    const float* ahead = bk + 4 * ldb;  // rows are separate pages: prefetch 4 rows ahead
    for (; j + 2 * 8 <= wv; j += 2 * 8) {
      if (kk + 4 < k) _mm_prefetch(reinterpret_cast<const char*>(ahead + j), _MM_HINT_T0);
      const __m256 b0 = _mm256_loadu_ps(bk + j), b1 = _mm256_loadu_ps(bk + j + 8);
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        float* ci = acc + i * w + j;
        _mm256_storeu_ps(ci, _mm256_fmadd_ps(av[i], b0, _mm256_loadu_ps(ci)));
        _mm256_storeu_ps(ci + 8, _mm256_fmadd_ps(av[i], b1, _mm256_loadu_ps(ci + 8)));
      }
    }
    for (; j < wv; j += 8) {
      const __m256 b0 = _mm256_loadu_ps(bk + j);
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) _mm256_storeu_ps(acc + i * w + j, _mm256_fmadd_ps(av[i], b0, _mm256_loadu_ps(acc + i * w + j)));
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


RLX_AVX2 void conv_row(float* out, int64_t taps, const float* const* src, const float* w, const int64_t* lo,
                    const int64_t* hi, int64_t ilo, int64_t ihi) {
  for (int64_t t = 0; t < taps; ++t) {  // edge columns, tap by tap
    const int64_t e0 = ilo < hi[t] ? ilo : hi[t], e1 = ihi > lo[t] ? ihi : lo[t];
    for (int64_t x = lo[t]; x < e0; ++x) out[x] = std::fma(w[t], src[t][x], out[x]);
    for (int64_t x = e1; x < hi[t]; ++x) out[x] = std::fma(w[t], src[t][x], out[x]);
  }
  // Interior: four independent accumulators (masked at the end) hide the FMA latency.
  for (int64_t x = ilo; x < ihi; x += 32) {
    __m256i m[4];
    for (int c = 0; c < 4; ++c) m[c] = tail_mask(std::clamp<int64_t>(ihi - x - c * 8, 0, 8));
    __m256 acc[4];
    for (int c = 0; c < 4; ++c) acc[c] = _mm256_maskload_ps(out + x + c * 8, m[c]);
    for (int64_t t = 0; t < taps; ++t) {
      const __m256 wv = _mm256_set1_ps(w[t]);
      for (int c = 0; c < 4; ++c) acc[c] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(src[t] + x + c * 8, m[c]), acc[c]);
    }
    for (int c = 0; c < 4; ++c) _mm256_maskstore_ps(out + x + c * 8, m[c], acc[c]);
  }
}

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
  t.ukr[1] = ukr<1>; t.ukr[2] = ukr<2>; t.ukr[3] = ukr<3>;
  t.ukr[4] = ukr<4>; t.ukr[5] = ukr<5>; t.ukr[6] = ukr<6>;
  t.dot = dot;
  t.gemv = gemv;
  t.transpose_pack = transpose_pack;
  t.widen = widen;
  t.conv_row = conv_row;
  return t;
}

}  // namespace

const IsaKernels* avx2_kernels() {
  static const IsaKernels table = make_table();
  return &table;
}

}  // namespace rlx::cpu
