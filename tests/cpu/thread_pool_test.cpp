// ThreadPool: coverage, deterministic chunk boundaries, nesting, exceptions.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>
#include <fstream>

#include "backends/cpu/thread_pool.h"
#include "rlx/error.h"

namespace rlx::cpu {
namespace {

using Chunks = std::set<std::pair<int64_t, int64_t>>;

Chunks chunks_of(ThreadPool& pool, int64_t n, int64_t grain) {
  std::mutex m;
  Chunks out;
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lk(m);
    out.insert({b, e});
  });
  return out;
}

TEST(ThreadPool, CoversRangeOnceWithBoundariesIndependentOfThreads) {
  ThreadPool p1(1), p2(2), p4(4);
  for (int64_t n : {1, 7, 64, 65, 1000, 4097, 100000}) {
    for (int64_t grain : {1, 3, 16, 1000}) {
      const Chunks c1 = chunks_of(p1, n, grain);
      EXPECT_EQ(c1, chunks_of(p2, n, grain)) << n << " " << grain;
      EXPECT_EQ(c1, chunks_of(p4, n, grain)) << n << " " << grain;
      // Consecutive, covering, at most 64 chunks, boundaries on multiples of grain.
      int64_t expect_begin = 0;
      for (auto [b, e] : c1) {
        EXPECT_EQ(b, expect_begin);
        EXPECT_LT(b, e);
        EXPECT_EQ(b % grain, 0);
        expect_begin = e;
      }
      EXPECT_EQ(expect_begin, n);
      EXPECT_LE(c1.size(), 64u);
      const int64_t chunk = c1.begin()->second - c1.begin()->first;
      EXPECT_GE(chunk, std::min(n, grain));
    }
  }
}

TEST(ThreadPool, EveryIndexVisitedExactlyOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(50000);
  for (int rep = 0; rep < 20; ++rep) {
    pool.parallel_for(int64_t(hits.size()), 100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
    });
  }
  for (auto& h : hits) ASSERT_EQ(h.load(), 20);
}

TEST(ThreadPool, UsesMoreThanOneThread) {
  ThreadPool pool(2);
  std::mutex m;
  std::set<std::thread::id> ids;
  for (int rep = 0; rep < 50 && ids.size() < 2; ++rep)
    pool.parallel_for(64, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lk(m);
      ids.insert(std::this_thread::get_id());
    });
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(pool.size(), 2);
}

// Chunks go by home range: the caller starts at chunk 0, worker i at i * count / threads (then
// each helps with the rest), so that jobs splitting the same data alike keep each part on one
// thread. With a shared counter the worker's first chunk was one of the first few.
TEST(ThreadPool, EachThreadStartsAtItsHomeRange) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  int worker_started_home = 0;
  for (int rep = 0; rep < 20; ++rep) {
    std::mutex m;
    std::vector<std::pair<int64_t, std::thread::id>> order;
    pool.parallel_for(64, 1, [&](int64_t b, int64_t) {
      {
        std::lock_guard<std::mutex> lk(m);
        order.emplace_back(b, std::this_thread::get_id());
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    });
    ASSERT_EQ(order.size(), 64u);
    bool caller_seen = false, worker_seen = false;
    for (const auto& [chunk, id] : order) {
      if (id == caller && !caller_seen) {
        EXPECT_EQ(chunk, 0);  // the caller always begins with its own share
        caller_seen = true;
      } else if (id != caller && !worker_seen) {
        worker_started_home += chunk == 32;  // unless it woke after the caller took chunk 32
        worker_seen = true;
      }
    }
  }
  EXPECT_GT(worker_started_home, 0);
}

TEST(ThreadPool, SingleThreadRunsInlineOnCaller) {
  ThreadPool pool(1);
  const auto me = std::this_thread::get_id();
  bool all_caller = true;
  pool.parallel_for(1000, 1, [&](int64_t, int64_t) { all_caller = all_caller && std::this_thread::get_id() == me; });
  EXPECT_TRUE(all_caller);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto outer = std::this_thread::get_id();
      pool.parallel_for(100, 1, [&](int64_t ib, int64_t ie) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        total += ie - ib;
      });
    }
  });
  EXPECT_EQ(total.load(), 6400);
}

TEST(ThreadPool, ExceptionPropagatesAndPoolStaysUsable) {
  ThreadPool pool(4);
  EXPECT_THROW(pool.parallel_for(1000, 1,
                                 [&](int64_t b, int64_t) {
                                   if (b >= 500) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 1000);
  ThreadPool one(1);
  EXPECT_THROW(one.parallel_for(10, 1, [](int64_t, int64_t) { throw std::logic_error("x"); }), std::logic_error);
}

TEST(ThreadPool, EmptyRangeAndBadSize) {
  ThreadPool pool(2);
  bool called = false;
  pool.parallel_for(0, 1, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
  EXPECT_THROW(ThreadPool(0), Error);
}

// A thread the system will not start is an rlx::Error, not std::system_error or a terminate:
// in a child process whose address space leaves room for a few thread stacks only (256
// workers need far more than 48 MB of stacks at any stack size glibc picks), the pool must
// stop the workers it started and throw ResourceExhausted; a small pool still works after.
TEST(ThreadPool, RefusedThreadIsAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    if (pages <= 0) _exit(10);
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (rlim_t(48) << 20);
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(11);
    try {
      ThreadPool big(256);
      _exit(12);  // every thread started: the limit did not bite
    } catch (const Error& e) {
      if (e.category() != ErrorCategory::ResourceExhausted) _exit(13);
      if (std::string(e.what()).find("refused worker thread") == std::string::npos) _exit(14);
    } catch (...) {
      _exit(15);
    }
    ThreadPool small(2);
    std::atomic<int64_t> sum{0};
    small.parallel_for(100, 1, [&](int64_t b, int64_t e) { sum += e - b; });
    _exit(sum.load() == 100 ? 0 : 16);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

TEST(ThreadPool, ConcurrentCallersSerialize) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) pool.parallel_for(1000, 10, [&](int64_t b, int64_t e) { sum += e - b; });
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(sum.load(), 3 * 50 * 1000);
}

}  // namespace
}  // namespace rlx::cpu
