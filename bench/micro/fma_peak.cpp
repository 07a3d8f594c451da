// The machine's single-core FMA peak, the ceiling the GEMM figures are read against: one
// thread runs 12 independent chains of vector FMAs (enough to cover the FMA latency on
// current x86 cores; AVX-512 when the CPU has it, else AVX2), no memory traffic, and
// reports GFLOP/s (2 flops per lane per FMA). rlx_bench_micro prints each 1-thread GEMM
// as a fraction of it.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/isa_region.h"

namespace rlx::bench {
namespace {

constexpr int kChains = 12;
constexpr int64_t kSteps = 1 << 16;

RLX_ISA_REGION_BEGIN("avx512f")
__attribute__((noipa)) float fma_loop_avx512(float seed) {  // noipa: no call is folded away
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t s = 0; s < kSteps; ++s)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 t = acc[0];
  for (int i = 1; i < kChains; ++i) t = _mm512_add_ps(t, acc[i]);
  return _mm512_reduce_add_ps(t);
}
RLX_ISA_REGION_END()

RLX_ISA_REGION_BEGIN("avx2,fma")
__attribute__((noipa)) float fma_loop_avx2(float seed) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(seed + float(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t s = 0; s < kSteps; ++s)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 t = acc[0];
  for (int i = 1; i < kChains; ++i) t = _mm256_add_ps(t, acc[i]);
  alignas(32) float v[8];
  _mm256_store_ps(v, t);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
RLX_ISA_REGION_END()

void bm_fma_peak(benchmark::State& st) {
  const bool wide = cpu::detect_isa() == cpu::Isa::Avx512;
  float seed = 1.0f;
  for (auto _ : st) {
    benchmark::DoNotOptimize(seed);
    const float r = wide ? fma_loop_avx512(seed) : fma_loop_avx2(seed);
    benchmark::DoNotOptimize(r);
  }
  const double flops = 2.0 * (wide ? 16 : 8) * kChains * double(kSteps);
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(wide ? "avx512" : "avx2");
}

[[maybe_unused]] const bool kRegistered = [] {
  if (cpu::detect_isa() != cpu::Isa::Scalar)
    benchmark::RegisterBenchmark("fma_peak/t1", bm_fma_peak)->UseRealTime()->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace rlx::bench
