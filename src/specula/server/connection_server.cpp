#include "specula/server/connection_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace specula::server {

namespace {

// How long a refused connection may take to send its request and read the 503 (see
// lingering_closer.h); clients send their request right after connecting.
constexpr std::chrono::milliseconds kRefusalLinger{1000};

int to_ms(time_t sec, time_t usec) {
  const int64_t ms = static_cast<int64_t>(sec) * 1000 + static_cast<int64_t>(usec) / 1000;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 24 * 3600 * 1000));
}

// Waits until `fd` has `events` (or an error/hang-up, which the next read or write reports).
bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int n;
  do {
    n = ::poll(&p, 1, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

// False once the peer has closed its side (a read would return end of file) or the socket failed.
bool peer_open(int fd) {
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

// The connection this thread serves and when its current request began (see client_gone and
// request_start in the header).
thread_local socket_t t_socket = INVALID_SOCKET;
thread_local std::chrono::steady_clock::time_point t_request_start;

struct CurrentSocket {
  explicit CurrentSocket(socket_t sock) { t_socket = sock; }
  ~CurrentSocket() { t_socket = INVALID_SOCKET; }
};

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    port = ntohs(in.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    port = ntohs(in6.sin6_port);
  }
  ip = text;
}

// One connection's byte stream for httplib::Server::process_request. Reads are buffered (httplib
// reads request lines a byte at a time) and the buffer lives as long as the connection, so a
// pipelined request is not lost between keep-alive rounds.
class SocketStream final : public httplib::Stream {
 public:
  SocketStream(int fd, int read_timeout_ms, int write_timeout_ms, const std::atomic<bool>& stopping)
      : fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms), stopping_(stopping) {}

  bool is_readable() const override { return pos_ < len_ || wait_for(fd_, POLLIN, read_timeout_ms_); }

  // Also false once the client has gone (a streamed response stops at once). While the server
  // stops, our own shutdown of the read side would look like that, so only poll then.
  bool is_writable() const override {
    return wait_for(fd_, POLLOUT, write_timeout_ms_) && (stopping_.load() || peer_open(fd_));
  }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == len_) {
      if (!wait_for(fd_, POLLIN, read_timeout_ms_)) return -1;
      if (size >= sizeof buffer_) return receive(ptr, size);
      const ssize_t n = receive(buffer_, sizeof buffer_);
      if (n <= 0) return n;
      pos_ = 0;
      len_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, len_ - pos_);
    std::memcpy(ptr, buffer_ + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  // Writes all of `size` (httplib does not always retry a short write), waiting at most the write
  // timeout for each part; -1 when the client is gone or too slow.
  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      if (!wait_for(fd_, POLLOUT, write_timeout_ms_)) return -1;
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (n > 0) done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
  }
  socket_t socket() const override { return fd_; }

  bool has_buffered() const { return pos_ < len_; }

 private:
  ssize_t receive(char* ptr, size_t size) {
    ssize_t n;
    do {
      n = ::recv(fd_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  const int fd_;
  const int read_timeout_ms_;
  const int write_timeout_ms_;
  const std::atomic<bool>& stopping_;
  char buffer_[4096];
  size_t pos_ = 0;
  size_t len_ = 0;
};

}  // namespace

ConnectionServer::ConnectionServer(size_t max_connections, std::string refusal_body)
    : max_connections_(max_connections),
      refusal_(fmt::format("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                           "Content-Length: {}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n{}",
                           refusal_body.size(), refusal_body)),
      closer_(max_connections, kRefusalLinger) {
  new_task_queue = [this] { return new ConnectionPool(max_connections_, stats_); };
}

bool ConnectionServer::widen_listen_backlog(int backlog) {
  const socket_t sock = svr_sock_;
  return sock != INVALID_SOCKET && ::listen(sock, backlog) == 0;  // listen() again only resizes the queue
}

void ConnectionServer::stop_connections() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  // Only the read side: a blocked read or keep-alive wait returns at once, while a response that
  // is being written (a cancelled generation's answer) still goes out.
  for (const socket_t sock : open_) ::shutdown(sock, SHUT_RD);
  closer_.stop();
}

bool ConnectionServer::track(socket_t sock) {
  std::lock_guard lock(mutex_);
  if (stopping_) return false;
  open_.insert(sock);
  return true;
}

void ConnectionServer::untrack(socket_t sock) {
  std::lock_guard lock(mutex_);
  open_.erase(sock);
}

void ConnectionServer::refuse(socket_t sock) {
  // What has already arrived of the request is dropped; the closer drops the rest.
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(sock, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  // A fresh socket's send buffer holds far more than this answer, so this never blocks.
  [[maybe_unused]] const ssize_t sent = ::send(sock, refusal_.data(), refusal_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(sock, SHUT_WR);
  closer_.add(sock);
}

bool ConnectionServer::client_gone() { return t_socket != INVALID_SOCKET && !peer_open(t_socket); }

std::chrono::steady_clock::time_point ConnectionServer::request_start() { return t_request_start; }

bool ConnectionServer::process_and_close_socket(socket_t sock) {
  if (ConnectionPool::refusing()) {
    refuse(sock);
    return false;
  }
  bool ok = false;
  if (track(sock)) {
    SocketStream stream(sock, to_ms(read_timeout_sec_, read_timeout_usec_),
                        to_ms(write_timeout_sec_, write_timeout_usec_), stopping_);
    const CurrentSocket current(sock);
    const int keep_alive_ms = to_ms(keep_alive_timeout_sec_, 0);
    // httplib's keep-alive rules: up to keep_alive_max_count_ requests, the last one answered with
    // `Connection: close`, and an idle connection closed after the keep-alive timeout.
    for (size_t left = keep_alive_max_count_; left > 0 && !stopping(); --left) {
      if (!stream.has_buffered() && !wait_for(sock, POLLIN, keep_alive_ms)) break;
      if (stopping()) break;
      bool connection_closed = false;
      t_request_start = std::chrono::steady_clock::now();
      ok = process_request(stream, /*close_connection=*/left == 1, connection_closed, nullptr);
      if (!ok || connection_closed) break;
    }
    untrack(sock);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace specula::server
