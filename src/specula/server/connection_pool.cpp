#include "specula/server/connection_pool.h"

#include "specula/util/error.h"

namespace specula::server {

namespace {

thread_local bool t_refusing = false;

struct RefusingScope {
  RefusingScope() { t_refusing = true; }
  ~RefusingScope() { t_refusing = false; }
  RefusingScope(const RefusingScope&) = delete;
  RefusingScope& operator=(const RefusingScope&) = delete;
};

}  // namespace

ConnectionPool::ConnectionPool(size_t max_connections, ConnectionStats& stats)
    : max_connections_(max_connections), stats_(stats) {
  if (max_connections == 0) fail("connection pool: max_connections must be >= 1, got 0");
  workers_.reserve(max_connections);
  for (size_t i = 0; i < max_connections; ++i) workers_.emplace_back([this] { work(); });
}

ConnectionPool::~ConnectionPool() { shutdown(); }

bool ConnectionPool::refusing() { return t_refusing; }

void ConnectionPool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    if (!shutting_down_ && held_ < max_connections_) {
      ++held_;
      stats_.open.fetch_add(1);
      tasks_.push_back(std::move(fn));
      ready_.notify_one();
      return;
    }
  }
  stats_.refused.fetch_add(1);
  RefusingScope scope;
  fn();
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (shutting_down_ && workers_.empty()) return;
    shutting_down_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

void ConnectionPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return !tasks_.empty() || shutting_down_; });
      if (tasks_.empty()) return;  // shutting down with nothing left to serve
      fn = std::move(tasks_.front());
      tasks_.pop_front();
    }
    fn();
    {
      std::lock_guard lock(mutex_);
      --held_;
    }
    stats_.open.fetch_sub(1);
  }
}

}  // namespace specula::server
