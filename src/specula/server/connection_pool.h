#pragma once
// The task queue behind httplib's accept loop (httplib::Server::new_task_queue): one worker
// thread per allowed connection and a hard bound on the connections held. httplib's own
// ThreadPool cannot refuse a task, so accepted sockets beyond its busy threads pile up in an
// unbounded list (only the fd limit stops them).
//
// At the bound, enqueue() runs the task at once on the calling (accept) thread with refusing()
// true. httplib's task owns the socket and is the only way to close it, so it must run; the
// connection handler (ConnectionServer) answers such a task with a canned 503 written without
// reading the request, which no client can slow down. The pool therefore works only with a
// handler that checks refusing().
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specula::server {

// Counters shared with the metrics; they outlive the pool (httplib deletes the pool when its
// accept loop ends).
struct ConnectionStats {
  std::atomic<int64_t> open{0};      // connections held: being served or handed to a worker
  std::atomic<uint64_t> refused{0};  // connections answered with the canned 503
};

class ConnectionPool final : public httplib::TaskQueue {
 public:
  // Starts `max_connections` worker threads (>= 1).
  ConnectionPool(size_t max_connections, ConnectionStats& stats);
  ~ConnectionPool() override;
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // Hands `fn` (one accepted connection) to a worker, or runs it on this thread with
  // refusing() true when max_connections are already held or the pool is shutting down.
  void enqueue(std::function<void()> fn) override;
  // Lets the workers finish the connections they hold, then joins them. Idempotent.
  void shutdown() override;

  // True while this thread runs a task that enqueue() refused.
  static bool refusing();

 private:
  void work();

  const size_t max_connections_;
  ConnectionStats& stats_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  size_t held_ = 0;  // tasks queued + running, <= max_connections_
  bool shutting_down_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace specula::server
