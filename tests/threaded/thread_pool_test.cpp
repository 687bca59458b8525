// ThreadPool::parallel_for: exact coverage, grain-aligned static ranges, exceptions, and many
// back-to-back small jobs (the decode pattern) without deadlock. parallel_for_balanced: the same
// coverage, and a stalled worker's range finished by the others.
#include "specula/util/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

namespace specula {
namespace {

struct Call {
  int worker;
  int64_t begin, end;
  bool operator<(const Call& o) const { return std::tie(begin, end, worker) < std::tie(o.begin, o.end, o.worker); }
};

// Runs one parallel_for (or parallel_for_balanced) and returns its calls, sorted by range.
std::vector<Call> record(ThreadPool& pool, int64_t n, int64_t grain, std::vector<int>* hits, bool balanced = false) {
  std::mutex mu;
  std::vector<Call> calls;
  const auto fn = [&](int worker, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) (*hits)[static_cast<size_t>(i)] += 1;  // ranges are disjoint
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back({worker, b, e});
  };
  if (balanced) {
    pool.parallel_for_balanced(n, grain, fn);
  } else {
    pool.parallel_for(n, grain, fn);
  }
  std::sort(calls.begin(), calls.end());
  return calls;
}

TEST(ThreadPool, CoversRangeExactlyOnceWithGrainAlignedBoundaries) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int64_t n : {1, 2, 3, 5, 7, 16, 17, 63, 64, 65, 100, 1001}) {
      for (int64_t grain : {1, 2, 3, 8, 16, 64, 1000, 5000}) {
        SCOPED_TRACE(testing::Message() << "threads=" << threads << " n=" << n << " grain=" << grain);
        std::vector<int> hits(static_cast<size_t>(n), 0);
        const auto calls = record(pool, n, grain, &hits);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "index " << i;
        ASSERT_FALSE(calls.empty());
        std::set<int> workers;
        int64_t expect_begin = 0;
        for (const auto& c : calls) {
          EXPECT_EQ(c.begin, expect_begin);
          EXPECT_LT(c.begin, c.end);
          EXPECT_EQ(c.begin % grain, 0);
          EXPECT_TRUE(c.end % grain == 0 || c.end == n);
          EXPECT_GE(c.worker, 0);
          EXPECT_LT(c.worker, threads);
          EXPECT_TRUE(workers.insert(c.worker).second) << "worker " << c.worker << " called twice";
          expect_begin = c.end;
        }
        EXPECT_EQ(expect_begin, n);
        const int64_t grains = (n + grain - 1) / grain;
        EXPECT_EQ(static_cast<int64_t>(calls.size()), std::min<int64_t>(grains, threads));
        // Static split: the same call gives each worker the same range again.
        std::vector<int> hits2(static_cast<size_t>(n), 0);
        const auto again = record(pool, n, grain, &hits2);
        ASSERT_EQ(again.size(), calls.size());
        for (size_t i = 0; i < calls.size(); ++i) {
          EXPECT_EQ(again[i].worker, calls[i].worker);
          EXPECT_EQ(again[i].begin, calls[i].begin);
          EXPECT_EQ(again[i].end, calls[i].end);
        }
      }
    }
  }
}

TEST(ThreadPool, EmptyAndNonPositiveGrain) {
  ThreadPool pool(3);
  int calls = 0;
  pool.parallel_for(0, 4, [&](int, int64_t, int64_t) { ++calls; });
  pool.parallel_for(-5, 4, [&](int, int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  std::vector<int> hits(10, 0);
  record(pool, 10, 0, &hits);  // grain <= 0 acts as 1
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(ThreadPool, ExceptionsPropagateAndPoolStaysUsable) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int thrower = 0; thrower < threads; ++thrower) {
      SCOPED_TRACE(testing::Message() << "threads=" << threads << " thrower=" << thrower);
      EXPECT_THROW(pool.parallel_for(30, 1,
                                     [&](int worker, int64_t, int64_t) {
                                       if (worker == thrower) throw std::runtime_error("worker failed");
                                     }),
                   std::runtime_error);
      std::vector<int> hits(30, 0);
      record(pool, 30, 1, &hits);
      for (int h : hits) EXPECT_EQ(h, 1);
    }
    // Every worker throwing still yields exactly one rethrown exception.
    EXPECT_THROW(pool.parallel_for(30, 1, [](int, int64_t, int64_t) { throw std::logic_error("all"); }),
                 std::logic_error);
  }
}

// The decode pattern: thousands of tiny jobs back to back. A lost wake-up or a stale epoch would
// hang here. (Each job costs a scheduler quantum when the machine is oversubscribed, so the count
// is the smallest that still runs the hand-off many times.)
TEST(ThreadPool, ManySmallJobsInARow) {
  for (auto [threads, jobs] : {std::pair{2, 10000}, std::pair{3, 1000}}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> total{0};
    int64_t want = 0;
    for (int job = 0; job < jobs; ++job) {
      const int64_t n = 2 + job % 6;  // always more than one grain, so the workers take part
      want += n;
      pool.parallel_for(n, 1, [&](int, int64_t b, int64_t e) { total.fetch_add(e - b); });
    }
    EXPECT_EQ(total.load(), want) << threads << " threads";
  }
}

TEST(ThreadPoolBalanced, CoversRangeExactlyOnceWithGrainAlignedBoundaries) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 5, 7, 16, 17, 63, 64, 65, 100, 1001, 100000}) {
      for (int64_t grain : {1, 2, 3, 8, 16, 64, 1000, 5000}) {
        SCOPED_TRACE(testing::Message() << "threads=" << threads << " n=" << n << " grain=" << grain);
        std::vector<int> hits(static_cast<size_t>(n), 0);
        const auto calls = record(pool, n, grain, &hits, /*balanced=*/true);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "index " << i;
        int64_t expect_begin = 0;
        for (const auto& c : calls) {
          EXPECT_EQ(c.begin, expect_begin);
          EXPECT_LT(c.begin, c.end);
          EXPECT_EQ(c.begin % grain, 0);
          EXPECT_TRUE(c.end % grain == 0 || c.end == n);
          EXPECT_GE(c.worker, 0);
          EXPECT_LT(c.worker, threads);
          expect_begin = c.end;
        }
        EXPECT_EQ(expect_begin, n);
      }
    }
  }
}

// Worker 0 stalls in its first chunk until some index of its own static range has been run by
// another worker: that only ends if the others take over what worker 0 left unclaimed. (Bounded,
// so a pool that never hands work over fails instead of hanging.)
TEST(ThreadPoolBalanced, OthersFinishTheRangeOfAStalledWorker) {
  for (int threads : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "threads=" << threads);
    ThreadPool pool(threads);
    const int64_t n = 3000;
    const int64_t first_end = n / threads;  // worker 0's static range is [0, first_end)
    std::vector<std::atomic<int>> owner(static_cast<size_t>(n));
    for (auto& o : owner) o.store(-1);
    std::atomic<bool> taken_over{false};
    bool stalled = false;
    pool.parallel_for_balanced(n, 1, [&](int worker, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        owner[static_cast<size_t>(i)].store(worker);
        if (worker != 0 && i < first_end) taken_over.store(true);
      }
      if (worker == 0 && !stalled) {
        stalled = true;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!taken_over.load() && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    EXPECT_TRUE(taken_over.load()) << "no other worker ran part of worker 0's range";
    for (int64_t i = 0; i < n; ++i) ASSERT_GE(owner[static_cast<size_t>(i)].load(), 0) << "index " << i;
  }
}

TEST(ThreadPoolBalanced, ExceptionsPropagateAndPoolStaysUsable) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    // Which worker runs an index is not fixed here, so the failure is tied to an index.
    for (int64_t bad : {0, 150, 299}) {
      SCOPED_TRACE(testing::Message() << "threads=" << threads << " bad=" << bad);
      EXPECT_THROW(pool.parallel_for_balanced(300, 1,
                                              [&](int, int64_t b, int64_t e) {
                                                if (b <= bad && bad < e) throw std::runtime_error("index failed");
                                              }),
                   std::runtime_error);
      std::vector<int> hits(300, 0);
      record(pool, 300, 1, &hits, /*balanced=*/true);
      for (int h : hits) EXPECT_EQ(h, 1);
      // A static job after a balanced one still gets its static ranges.
      std::vector<int> hits2(30, 0);
      EXPECT_EQ(static_cast<int>(record(pool, 30, 1, &hits2).size()), threads);
    }
  }
}

TEST(ThreadPoolBalanced, ManySmallJobsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  int64_t want = 0;
  for (int job = 0; job < 10000; ++job) {
    const int64_t n = 2 + job % 70;
    want += n;
    pool.parallel_for_balanced(n, 1, [&](int, int64_t b, int64_t e) { total.fetch_add(e - b); });
  }
  EXPECT_EQ(total.load(), want);
}

TEST(ThreadPool, GlobalPoolIsShared) {
  ThreadPool& a = ThreadPool::global();
  EXPECT_EQ(&a, &ThreadPool::global());
  EXPECT_GE(a.size(), 1);
  std::vector<int> hits(50, 0);
  record(a, 50, 4, &hits);
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(ThreadPool, DestroysCleanlyWhileIdle) {
  for (int i = 0; i < 50; ++i) {
    auto pool = std::make_unique<ThreadPool>(3);
    if (i % 2) {
      std::vector<int> hits(9, 0);
      record(*pool, 9, 1, &hits);
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace specula
