// AVX-512 kernels of kv_attention (kv_attention.h): the scores of several query heads against
// a run of cache rows, and their probabilities' weighted sum of value rows, each cache row
// read (and widened from f16) once for every head of its group. Scores: sixteen rows at a
// time, a row's products summed into one vector per head, the sixteen vectors reduced to
// their sixteen sums by a fixed tree of shuffles (no horizontal sum per row). Weighted sums:
// the heads' outputs held in registers over the rows. Each score and each output element is
// summed in an order fixed by d and by the row's place in its run of sixteen, never by the
// thread count or by how many heads share the call.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "backends/cpu/kernels/isa_region.h"
#include "backends/cpu/kernels/kv_attention.h"

RLX_ISA_REGION_BEGIN("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c")
namespace rlx::cpu {
namespace {

// Row j's d values as f32, 16 at a time.
inline __m512 row_chunk(const void* rows, bool f16, int64_t j, int64_t d, int64_t c) {
  if (f16)
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(rows) + j * d + 16 * c)));
  return _mm512_loadu_ps(static_cast<const float*>(rows) + j * d + 16 * c);
}

// v[j] = the sum of a[j]'s lanes, for j < 16: pairs, quads, then 128-bit quarters.
inline __m512 sum16(__m512* a) {
  __m512 b[8], c[4];
  for (int i = 0; i < 8; ++i)
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44), _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
  const __m512 d0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xDD));
  const __m512 d1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x88), _mm512_shuffle_f32x4(c[2], c[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xDD));
}

// NC = d / 16 vectors a row. Sixteen rows widened once into kb (rows past n zeros), then per
// head their sixteen products summed by sum16.
template <int NC>
void scores_nc(const void* rows, bool f16, int64_t n, const float* q, int64_t g, float* s, int64_t lds) {
  constexpr int64_t d = 16 * NC;
  alignas(64) float kb[16 * d];
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int rn = int(std::min<int64_t>(16, n - j0));
    for (int r = 0; r < 16; ++r)
#pragma GCC unroll 16
      for (int c = 0; c < NC; ++c)
        _mm512_store_ps(kb + r * d + 16 * c, r < rn ? row_chunk(rows, f16, j0 + r, d, c) : _mm512_setzero_ps());
    for (int64_t h = 0; h < g; ++h) {
      const float* qh = q + h * d;
      __m512 a[16];
#pragma GCC unroll 16
      for (int r = 0; r < 16; ++r) {
        a[r] = _mm512_mul_ps(_mm512_load_ps(kb + r * d), _mm512_loadu_ps(qh));
#pragma GCC unroll 16
        for (int c = 1; c < NC; ++c)
          a[r] = _mm512_fmadd_ps(_mm512_load_ps(kb + r * d + 16 * c), _mm512_loadu_ps(qh + 16 * c), a[r]);
      }
      _mm512_mask_storeu_ps(s + h * lds + j0, __mmask16((1u << rn) - 1), sum16(a));
    }
  }
}

// HN heads at once (HN x NC <= 16 vectors held over the rows).
template <int NC, int HN>
void mix_heads(const void* rows, bool f16, int64_t n, const float* p, int64_t ldp, float* o) {
  constexpr int64_t d = 16 * NC;
  __m512 acc[HN][NC];
#pragma GCC unroll 16
  for (int h = 0; h < HN; ++h)
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) acc[h][c] = _mm512_loadu_ps(o + h * d + 16 * c);
  for (int64_t j = 0; j < n; ++j) {
    __m512 v[NC];
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) v[c] = row_chunk(rows, f16, j, d, c);
#pragma GCC unroll 16
    for (int h = 0; h < HN; ++h) {
      const __m512 w = _mm512_set1_ps(p[h * ldp + j]);
#pragma GCC unroll 16
      for (int c = 0; c < NC; ++c) acc[h][c] = _mm512_fmadd_ps(w, v[c], acc[h][c]);
    }
  }
#pragma GCC unroll 16
  for (int h = 0; h < HN; ++h)
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(o + h * d + 16 * c, acc[h][c]);
}

// Heads in passes of up to four (fewer where four would not fit the registers), so a group
// of up to four heads reads each value row once.
template <int NC>
void mix_nc(const void* rows, bool f16, int64_t n, const float* p, int64_t ldp, int64_t g, float* o) {
  constexpr int kMax = NC <= 4 ? 4 : 16 / NC;
  for (int64_t h = 0; h < g;) {
    const int hn = int(std::min<int64_t>(kMax, g - h));
    const float* ph = p + h * ldp;
    float* oh = o + h * 16 * NC;
    switch (hn) {
      case 4: mix_heads<NC, (kMax >= 4 ? 4 : 1)>(rows, f16, n, ph, ldp, oh); break;
      case 3: mix_heads<NC, (kMax >= 3 ? 3 : 1)>(rows, f16, n, ph, ldp, oh); break;
      case 2: mix_heads<NC, (kMax >= 2 ? 2 : 1)>(rows, f16, n, ph, ldp, oh); break;
      default: mix_heads<NC, 1>(rows, f16, n, ph, ldp, oh); break;
    }
    h += hn;
  }
}

// f(std::integral_constant<int, NC>{}) for d = 16 NC: NC = 1..8, or 16 (the d kv_kernels takes).
template <class F>
void with_nc(int64_t d, F&& f) {
  switch (d / 16) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: return f(std::integral_constant<int, 16>{});
  }
}

void kv_scores(const void* rows, bool f16, int64_t n, int64_t d, const float* q, int64_t g, float* s, int64_t lds) {
  with_nc(d, [&](auto nc) { scores_nc<decltype(nc)::value>(rows, f16, n, q, g, s, lds); });
}

void kv_mix(const void* rows, bool f16, int64_t n, int64_t d, const float* p, int64_t ldp, int64_t g, float* o) {
  with_nc(d, [&](auto nc) { mix_nc<decltype(nc)::value>(rows, f16, n, p, ldp, g, o); });
}

}  // namespace
}  // namespace rlx::cpu
RLX_ISA_REGION_END()

namespace rlx::cpu {
const KvKernels* kv_kernels_avx512() {  // outside the region: callable on any CPU
  static const KvKernels k{kv_scores, kv_mix};
  return &k;
}
}  // namespace rlx::cpu
