// A persistent pool of worker threads. parallel_for splits [0, n) into chunks whose
// boundaries depend only on n and grain (never on the thread count), so reductions
// that combine per-chunk partials in chunk order are identical for any thread count.
// Thread t first takes the chunks of its own share [t * count / T, (t + 1) * count / T) in
// order (the caller is thread 0), then helps with the rest: the same part of two similar
// jobs mostly runs on the same core.
// Nested parallel_for calls run inline. Not re-entrant across different callers:
// one executable run at a time uses a pool (each clone gets its own pool or shares
// one guarded by a mutex).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

namespace rlx::cpu {

class ThreadPool {
 public:
  // threads >= 1; 1 runs everything inline. Throws rlx::Error (ResourceExhausted) when the
  // system refuses a worker thread, having stopped the ones it started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;
  // Calls f(begin, end) for consecutive chunks covering [0, n); chunk size is
  // max(grain, ceil(n / 64)) rounded so chunk boundaries depend on n and grain only.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);

 private:
  void stop_workers();  // stops and joins every worker
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Runs f(i) for i in [0, n) on the pool, one index per task (serially without a pool, with one
// thread, or for a single index).
template <class F>
void for_each_index(ThreadPool* pool, int64_t n, F&& f) {
  if (pool && pool->size() > 1 && n > 1) {
    pool->parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) f(i);
    });
  } else {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

}  // namespace rlx::cpu
