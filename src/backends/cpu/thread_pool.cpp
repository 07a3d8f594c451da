// Persistent worker pool. One job at a time: the caller publishes the job under a
// mutex, wakes the workers and takes chunks itself from the same atomic counter;
// workers that woke for the job check in and out so the caller returns only when no
// worker can still touch the job (the std::function it references lives on the
// caller's stack).
// Waiting spins briefly before it blocks: a model run issues hundreds of short jobs back
// to back (an LLM decode step ~400), and a futex sleep/wake per job costs more than the
// job. Workers poll the job generation for ~kSpinRounds pauses (tens of microseconds)
// after each job, the caller polls the join count likewise, then both fall back to the
// condition variables, so an idle pool sleeps.
// Chunks are handed out by home range: participant p (the caller 0, worker i as i) takes the
// chunks of [p * count / T, (p + 1) * count / T) in order, then helps with the others' ranges.
// Consecutive jobs that split the same data the same way (the spatial strips and tiles of one
// convolution after another) then mostly run each part on the thread that wrote it: reading
// what the other core wrote cost about three times as much as reading one's own (a 1 MB
// buffer: 28 against 9 us on this VM's two cores), and a shared counter gave chunk c to
// either thread. The chunk boundaries do not change: the results are the same bits.
#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "rlx/error.h"

namespace rlx::cpu {
namespace {

// True while this thread executes a chunk of some pool's job (nested calls run inline).
thread_local bool t_inside_task = false;

constexpr int kSpinRounds = 1 << 13;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

struct TaskScope {
  bool saved;
  TaskScope() : saved(t_inside_task) { t_inside_task = true; }
  ~TaskScope() { t_inside_task = saved; }
};

}  // namespace

struct ThreadPool::Impl {
  int threads = 1;
  std::vector<std::thread> workers;

  std::mutex call_mutex;  // serializes parallel_for calls from different threads

  std::mutex m;
  std::condition_variable wake;   // workers wait for a new generation
  std::condition_variable idle;   // the caller waits for joined == 0
  std::atomic<uint64_t> generation{0};  // written under m; read without it while spinning
  std::atomic<bool> stop{false};
  bool job_open = false;
  std::atomic<int> joined{0};           // written under m

  // The current job (written under m before generation is bumped).
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 1;
  // Participant p's home range of chunks: the next one to take, and its end.
  struct alignas(64) Cursor {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Cursor[]> cursors;

  std::mutex error_mutex;
  std::exception_ptr error;

  // Participant p's chunks: its own range first, then the others' in turn.
  void run_chunks(int p, const std::function<void(int64_t, int64_t)>& f, int64_t total, int64_t size) {
    TaskScope scope;
    for (int r = 0; r < threads; ++r) {
      Cursor& cur = cursors[(p + r) % threads];
      for (;;) {
        const int64_t c = cur.next.fetch_add(1, std::memory_order_relaxed);
        if (c >= cur.end) break;
        const int64_t b = c * size, e = std::min(total, b + size);
        try {
          f(b, e);
        } catch (...) {
          std::lock_guard<std::mutex> lk(error_mutex);
          if (!error) error = std::current_exception();
          for (int q = 0; q < threads; ++q)  // skip the chunks not yet taken
            cursors[q].next.store(cursors[q].end, std::memory_order_relaxed);
        }
      }
    }
  }

  void worker_loop(int p) {
    t_inside_task = true;  // a worker never starts nested parallel work
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(m);
    for (;;) {
      lk.unlock();
      for (int i = 0; i < kSpinRounds && generation.load(std::memory_order_acquire) == seen &&
                      !stop.load(std::memory_order_relaxed);
           ++i)
        cpu_relax();
      lk.lock();
      wake.wait(lk, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      if (!job_open) continue;
      ++joined;
      const auto* f = fn;
      int64_t total = n, size = chunk;
      lk.unlock();
      run_chunks(p, *f, total, size);
      lk.lock();
      if (--joined == 0) idle.notify_all();
    }
  }
};

ThreadPool::ThreadPool(int threads) : impl_(std::make_unique<Impl>()) {
  if (threads < 1) fail(ErrorCategory::InvalidArgument, "ThreadPool: threads must be >= 1, got ", threads);
  impl_->threads = threads;
  impl_->cursors = std::make_unique<Impl::Cursor[]>(size_t(threads));
  impl_->workers.reserve(size_t(threads - 1));
  // The system may refuse a thread (its limit on threads or on memory for their stacks): the
  // workers already started are stopped and joined, and the caller gets an rlx::Error.
  int started = 1;
  try {
    for (; started < threads; ++started)
      impl_->workers.emplace_back([this, i = started] { impl_->worker_loop(i); });
  } catch (const std::system_error& e) {
    stop_workers();
    fail(ErrorCategory::ResourceExhausted, "ThreadPool: the system refused worker thread ", started + 1, " of ",
         threads, " (", e.what(), ")");
  }
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lk(impl_->m);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->workers) t.join();
  impl_->workers.clear();
}

ThreadPool::~ThreadPool() { stop_workers(); }

int ThreadPool::size() const { return impl_->threads; }

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  // Chunk size depends on n and grain only; rounded up to a multiple of grain so that
  // chunk boundaries fall on grain boundaries (kernels may pass a row length).
  int64_t chunk = std::max(grain, (n + 63) / 64);
  chunk = (chunk + grain - 1) / grain * grain;
  int64_t count = (n + chunk - 1) / chunk;

  if (impl_->threads == 1 || count == 1 || t_inside_task) {
    TaskScope scope;
    for (int64_t c = 0; c < count; ++c) f(c * chunk, std::min(n, (c + 1) * chunk));
    return;
  }

  std::lock_guard<std::mutex> call_lock(impl_->call_mutex);
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lk(s.m);
    s.fn = &f;
    s.n = n;
    s.chunk = chunk;
    for (int q = 0; q < s.threads; ++q) {
      s.cursors[q].next.store(q * count / s.threads, std::memory_order_relaxed);
      s.cursors[q].end = (q + 1) * count / s.threads;
    }
    s.error = nullptr;
    s.job_open = true;
    ++s.generation;
  }
  s.wake.notify_all();
  s.run_chunks(0, f, n, chunk);
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lk(s.m);
    s.job_open = false;  // late wakers skip this job
    if (s.joined != 0) {
      lk.unlock();
      for (int i = 0; i < kSpinRounds && s.joined.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
      lk.lock();
    }
    s.idle.wait(lk, [&] { return s.joined == 0; });
    s.fn = nullptr;
  }
  {
    std::lock_guard<std::mutex> lk(s.error_mutex);
    err = s.error;
    s.error = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace rlx::cpu
