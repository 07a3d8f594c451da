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
#include <cstdio>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#define RLX_FMA_TARGET __attribute__((target("avx2,fma")))
#else
#define RLX_FMA_TARGET
#endif

namespace {

using Clock = std::chrono::steady_clock;

// GFLOP/s of `iters` steps of 10 independent FMA chains (enough to cover the latency).
RLX_FMA_TARGET double fma_rate(long iters) {
#if defined(__x86_64__)
  __m256 a[10];
  for (int i = 0; i < 10; ++i) a[i] = _mm256_set1_ps(1.0f + float(i) * 1e-7f);
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  const auto t0 = Clock::now();
  for (long k = 0; k < iters; ++k)
    for (int i = 0; i < 10; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  float s[8], sum = 0;
  for (int i = 0; i < 10; ++i) {
    _mm256_storeu_ps(s, a[i]);
    for (float v : s) sum += v;
  }
  if (sum == 1234.5f) std::printf(" ");  // keeps the chains alive
  return double(iters) * 10 * 16 / dt / 1e9;
#else
  (void)iters;
  return 0;
#endif
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
  const bool fma =
#if defined(__x86_64__)
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
      false;
#endif
  const double rtt = round_trip_ns(20000);
  const long iters = 4000000;
  double one = 0, two[2] = {0, 0};
  if (fma) {
    one = fma_rate(iters);
    std::atomic<int> ready{0};
    std::thread t([&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      two[1] = fma_rate(iters);
    });
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    two[0] = fma_rate(iters);
    t.join();
  }
  std::printf("rtt_ns=%.0f fma1_gflops=%.0f fma2_gflops=%.0f+%.0f\n", rtt, one, two[0], two[1]);
  return 0;
}
