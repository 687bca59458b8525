#include "specula/server/lingering_closer.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "specula/util/error.h"

namespace specula::server {

namespace {

using Clock = std::chrono::steady_clock;

// Reads and drops what the client sent, without waiting; false once it has closed its side (or
// the socket failed), when there is nothing left to wait for.
bool drain(int fd) {
  char sink[4096];
  for (int i = 0; i < 16; ++i) {  // a bounded amount per wake-up
    const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
  return true;
}

}  // namespace

LingeringCloser::LingeringCloser(size_t capacity, std::chrono::milliseconds linger)
    : capacity_(capacity), linger_(linger) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) fail("serve: cannot create an eventfd for closing refused connections (errno {})", errno);
  thread_ = std::thread([this] { run(); });
}

LingeringCloser::~LingeringCloser() {
  stop();
  if (thread_.joinable()) thread_.join();
  ::close(wake_fd_);
}

void LingeringCloser::add(int fd) {
  {
    std::lock_guard lock(mutex_);
    if (!stopped_ && capacity_ > 0) {
      const Entry entry{fd, Clock::now() + linger_};
      if (entries_.size() < capacity_) {
        entries_.push_back(entry);
      } else {
        // Full: the socket that has waited longest has had the most time to be read; it gives
        // up its place (what arrived for it is read first, so its close is a FIN, not a reset).
        auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                       [](const Entry& a, const Entry& b) { return a.deadline < b.deadline; });
        drain(oldest->fd);
        ::close(oldest->fd);
        *oldest = entry;
      }
      wake();
      return;
    }
  }
  ::close(fd);
}

void LingeringCloser::stop() {
  std::lock_guard lock(mutex_);
  if (stopped_) return;
  stopped_ = true;
  for (const Entry& e : entries_) ::close(e.fd);
  entries_.clear();
  wake();
}

size_t LingeringCloser::waiting() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void LingeringCloser::wake() const {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void LingeringCloser::run() {
  std::vector<pollfd> polled;
  for (;;) {
    int timeout_ms = -1;
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      // Close what has ended (client closed, linger over) and poll the rest.
      const auto now = Clock::now();
      for (size_t i = 0; i < entries_.size();) {
        if (now >= entries_[i].deadline || !drain(entries_[i].fd)) {
          ::close(entries_[i].fd);
          entries_[i] = entries_.back();
          entries_.pop_back();
        } else {
          ++i;
        }
      }
      polled.assign(1, pollfd{wake_fd_, POLLIN, 0});
      for (const Entry& e : entries_) {
        polled.push_back(pollfd{e.fd, POLLIN, 0});
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(e.deadline - now).count() + 1;
        timeout_ms = timeout_ms < 0 ? static_cast<int>(left) : std::min(timeout_ms, static_cast<int>(left));
      }
    }
    // The fds stay open while polled: only this thread closes them, except stop(), which wakes
    // this poll through wake_fd_ (a closed fd in a running poll is only reported at its end).
    ::poll(polled.data(), polled.size(), timeout_ms);
    uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
  }
}

}  // namespace specula::server
