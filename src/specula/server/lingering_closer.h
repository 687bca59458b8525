#pragma once
// Closes refused connections without losing their answer. A connection refused at once (see
// ConnectionServer) gets its 503 before its request has arrived; closing it then makes the kernel
// answer the request with a reset, and clients that write the request in more than one part see
// "connection reset" instead of the 503. So a refused socket, its answer sent and its write side
// shut, waits here on one thread: what arrives is read and dropped, and it is closed when the
// client closes its side or after the linger time. At most `capacity` sockets wait (descriptors
// stay bounded); when full, the one that has waited longest is closed to make room.
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace specula::server {

class LingeringCloser {
 public:
  LingeringCloser(size_t capacity, std::chrono::milliseconds linger);
  ~LingeringCloser();  // closes every waiting socket
  LingeringCloser(const LingeringCloser&) = delete;
  LingeringCloser& operator=(const LingeringCloser&) = delete;

  // Takes `fd` and closes it later (now, when stopped). Never blocks on the client.
  void add(int fd);
  // Closes every waiting socket now and stops taking new ones (they are closed at once).
  void stop();
  size_t waiting() const;

 private:
  struct Entry {
    int fd;
    std::chrono::steady_clock::time_point deadline;
  };
  void run();
  void wake() const;

  const size_t capacity_;
  const std::chrono::milliseconds linger_;
  int wake_fd_ = -1;  // an eventfd that interrupts the thread's poll
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace specula::server
