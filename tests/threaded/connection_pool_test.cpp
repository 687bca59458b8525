// server/connection_pool.h: at most max_connections tasks are held (queued or running); a task
// beyond them runs at once on the enqueuing thread with refusing() true; the counters follow;
// shutdown() still runs what was handed over and then refuses.
#include "specula/server/connection_pool.h"
#include "specula/util/error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace specula::server {
namespace {

// Holds every task until release().
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
};

template <class Pred>
bool eventually(Pred pred) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(ConnectionPool, TasksBeyondTheBoundRunAtOnceOnTheCallerAsRefusals) {
  ConnectionStats stats;
  Gate gate;
  std::atomic<int> served{0};
  std::atomic<int> refused_on_worker{0};
  {
    ConnectionPool pool(3, stats);
    for (int i = 0; i < 3; ++i) {
      pool.enqueue([&] {
        if (ConnectionPool::refusing()) ++refused_on_worker;
        gate.wait();
        ++served;
      });
    }
    EXPECT_EQ(stats.open.load(), 3);

    const auto caller = std::this_thread::get_id();
    int refused_here = 0;
    for (int i = 0; i < 5; ++i) {
      pool.enqueue([&] {
        EXPECT_TRUE(ConnectionPool::refusing());
        EXPECT_EQ(std::this_thread::get_id(), caller);
        ++refused_here;
      });
    }
    EXPECT_EQ(refused_here, 5);  // ran before enqueue returned
    EXPECT_FALSE(ConnectionPool::refusing());
    EXPECT_EQ(stats.refused.load(), 5u);
    EXPECT_EQ(stats.open.load(), 3);

    gate.release();
    ASSERT_TRUE(eventually([&] { return stats.open.load() == 0; }));
    EXPECT_EQ(served.load(), 3);
    EXPECT_EQ(refused_on_worker.load(), 0);

    // A freed slot takes the next connection again.
    std::atomic<bool> ran{false};
    pool.enqueue([&] { ran = !ConnectionPool::refusing(); });
    ASSERT_TRUE(eventually([&] { return ran.load(); }));
    EXPECT_EQ(stats.refused.load(), 5u);
  }
  EXPECT_EQ(stats.open.load(), 0);
}

TEST(ConnectionPool, ShutdownServesWhatWasHandedOverThenRefuses) {
  ConnectionStats stats;
  std::atomic<int> served{0};
  ConnectionPool pool(2, stats);
  for (int i = 0; i < 2; ++i) {
    pool.enqueue([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++served;
    });
  }
  pool.shutdown();
  EXPECT_EQ(served.load(), 2);
  EXPECT_EQ(stats.open.load(), 0);
  bool refused = false;
  pool.enqueue([&] { refused = ConnectionPool::refusing(); });  // the task must still run (it owns a socket)
  EXPECT_TRUE(refused);
  pool.shutdown();  // idempotent
}

TEST(ConnectionPool, ZeroConnectionsIsAnError) {
  ConnectionStats stats;
  EXPECT_THROW(ConnectionPool(0, stats), specula::Error);
}

}  // namespace
}  // namespace specula::server
