// Probes the two vCPUs' placement, for benchmark rows on shared machines: a cache line's
// round trip between two threads (ns: about 100 when the vCPUs share a cache, 350-600 when
// the hypervisor has put them apart, 1,000+ when they share one core), and FMA throughput of
// one thread alone against two at once (equal when each has a core of its own). On the VMs
// these benchmarks ran on, the placement changed on a scale of minutes, and two-thread
// latencies moved with it (ResNet-50: 16 ms together, 19 apart); bench/models/run.sh takes
// this probe before every round and prints the median round trip next to each row.
//   rlx_bench_vmstate      -> "rtt_ns=R fma1_gflops=A fma2_gflops=B+C"
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "fma_loop.h"

namespace {

using Clock = std::chrono::steady_clock;

// GFLOP/s of one thread running the AVX2 FMA chains (bench/fma_loop.h) for `steps` steps.
double fma_rate(int64_t steps) {
  const auto t0 = Clock::now();
  const float r = rlx::bench::fma_loop_avx2(1.0f, steps);
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  if (r == 1234.5f) std::printf(" ");  // the result is used
  return 2.0 * 8 * rlx::bench::kFmaChains * double(steps) / dt / 1e9;
}

// The mean round trip of a flag bounced n times between this thread and another.
double round_trip_ns(int n) {
  std::atomic<int> flag{0};
  std::thread other([&] {
    for (int i = 0; i < n; ++i) {
      while (flag.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      flag.store(2 * i + 2, std::memory_order_release);
    }
  });
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    flag.store(2 * i + 1, std::memory_order_release);
    while (flag.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  other.join();
  return dt / n * 1e9;
}

}  // namespace

int main() {
  const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const double rtt = round_trip_ns(20000);
  const int64_t steps = 3000000;
  double one = 0, two[2] = {0, 0};
  if (fma) {
    one = fma_rate(steps);
    std::atomic<int> ready{0};
    std::thread t([&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      two[1] = fma_rate(steps);
    });
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    two[0] = fma_rate(steps);
    t.join();
  }
  std::printf("rtt_ns=%.0f fma1_gflops=%.0f fma2_gflops=%.0f+%.0f\n", rtt, one, two[0], two[1]);
  return 0;
}
