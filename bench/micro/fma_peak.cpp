// The machine's single-core FMA peak, the ceiling the GEMM figures are read against: one
// thread runs 12 independent chains of vector FMAs (enough to cover the FMA latency on
// current x86 cores; AVX-512 when the CPU has it, else AVX2), no memory traffic, and
// reports GFLOP/s (2 flops per lane per FMA). rlx_bench_micro prints each 1-thread GEMM
// as a fraction of it.
#include <benchmark/benchmark.h>

#include "backends/cpu/isa.h"
#include "fma_loop.h"

namespace rlx::bench {
namespace {

constexpr int64_t kSteps = 1 << 16;

void bm_fma_peak(benchmark::State& st) {
  const bool wide = cpu::detect_isa() == cpu::Isa::Avx512;
  float seed = 1.0f;
  for (auto _ : st) {
    benchmark::DoNotOptimize(seed);
    const float r = wide ? fma_loop_avx512(seed, kSteps) : fma_loop_avx2(seed, kSteps);
    benchmark::DoNotOptimize(r);
  }
  const double flops = 2.0 * (wide ? 16 : 8) * kFmaChains * double(kSteps);
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
