// The FMA loops the benchmarks read a core's arithmetic rate from: `chains` independent
// chains of vector FMAs (12 cover the FMA latency on current x86 cores), `steps` FMAs each,
// no memory traffic. fma_loop_*(seed) returns a sum of the chains so that no call is folded
// away; each call does 2 * lanes * kFmaChains * steps flops (lanes: 16 for AVX-512, 8 for
// AVX2). Used by the micro benchmark's FMA peak (bench/micro/fma_peak.cpp) and by the vCPU
// placement probe (bench/vm_state.cpp). x86-64 only.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/kernels/isa_region.h"

namespace rlx::bench {

constexpr int kFmaChains = 12;

RLX_ISA_REGION_BEGIN("avx512f")
__attribute__((noipa)) inline float fma_loop_avx512(float seed, int64_t steps) {
  __m512 acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t s = 0; s < steps; ++s)
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 t = acc[0];
  for (int i = 1; i < kFmaChains; ++i) t = _mm512_add_ps(t, acc[i]);
  return _mm512_reduce_add_ps(t);
}
RLX_ISA_REGION_END()

RLX_ISA_REGION_BEGIN("avx2,fma")
__attribute__((noipa)) inline float fma_loop_avx2(float seed, int64_t steps) {
  __m256 acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm256_set1_ps(seed + float(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t s = 0; s < steps; ++s)
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 t = acc[0];
  for (int i = 1; i < kFmaChains; ++i) t = _mm256_add_ps(t, acc[i]);
  alignas(32) float v[8];
  _mm256_store_ps(v, t);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
RLX_ISA_REGION_END()

}  // namespace rlx::bench
