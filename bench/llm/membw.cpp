// Measures this machine's memory read bandwidth (GB/s) with `threads` threads each summing
// its part of a buffer far larger than the caches; the best of several passes. The LLM
// benchmark divides the weight bytes read per generated token by it: decode is bound by
// this number.
//   rlx_bench_membw [threads] [MiB]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

__attribute__((target("avx2"))) static double sum_range(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  float t[8];
  _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  double s = 0;
  for (float v : t) s += v;
  return s;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  const size_t mib = argc > 2 ? size_t(std::max(64, std::atoi(argv[2]))) : 512;
  const size_t n = mib * (size_t(1) << 20) / sizeof(float);
  float* buf = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  for (size_t i = 0; i < n; ++i) buf[i] = float(i & 1023);
  double best = 0, sink = 0;
  for (int pass = 0; pass < 7; ++pass) {
    std::vector<double> part(static_cast<size_t>(threads), 0.0);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        size_t b = n / size_t(threads) * size_t(t) / 32 * 32, e = t + 1 == threads ? n : n / size_t(threads) * size_t(t + 1) / 32 * 32;
        part[size_t(t)] = sum_range(buf + b, e - b);
      });
    for (auto& t : ts) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (double p : part) sink += p;
    best = std::max(best, double(n * sizeof(float)) / s / 1e9);
  }
  std::printf("read_bandwidth_gbs=%.2f threads=%d buffer_mib=%zu (checksum %g)\n", best, threads, mib, sink);
  std::free(buf);
  return 0;
}
