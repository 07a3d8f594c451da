// The thread pool's fork / join cost: one parallel_for over as many chunks as threads, each
// chunk a fixed amount of busy work (0, 1 or 10 microseconds of dependent adds), timed per
// call. At 0 us the time is the fork / join alone (waking the workers, the chunk counter, the
// join); with work it shows when a job is long enough to be worth splitting: two threads
// win once the per-thread work exceeds the fork / join time. The t1 rows run the same body
// inline (ThreadPool with one thread takes no lock and wakes nobody), the baseline.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "backends/cpu/thread_pool.h"

namespace rlx::bench {
namespace {

// A dependent chain of multiply-adds; adds_per_us() calibrates it once so that a chunk is
// about the stated number of microseconds.
__attribute__((noipa)) uint64_t spin_work(int64_t adds, uint64_t seed) {
  uint64_t x = seed;
  for (int64_t i = 0; i < adds; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

int64_t adds_per_us() {
  static const int64_t per_us = [] {
    const int64_t n = 1 << 22;
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(spin_work(n, 1));
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    return std::max<int64_t>(1, int64_t(double(n) / us));
  }();
  return per_us;
}

void bm_fork_join(benchmark::State& st, int threads, int work_us) {
  cpu::ThreadPool pool(threads);
  const int64_t adds = work_us * adds_per_us();
  for (auto _ : st)  // the time per iteration is the time per call
    pool.parallel_for(threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) benchmark::DoNotOptimize(spin_work(adds, uint64_t(i)));
    });
}

[[maybe_unused]] const bool kRegistered = [] {
  for (int t : {1, 2})
    for (int work : {0, 1, 10})
      benchmark::RegisterBenchmark(
          ("thread_pool/fork_join_" + std::to_string(work) + "us/t" + std::to_string(t)).c_str(), bm_fork_join, t,
          work)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace rlx::bench
