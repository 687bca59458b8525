#pragma once
// httplib::Server with a bounded number of connections (ConnectionPool) and its own connection
// loop, so that it knows each connection's socket. That buys two things httplib 0.11 cannot do:
//  - a connection over the bound gets a canned 503 (OpenAI's error shape, `Connection: close`)
//    written without reading its request, so a slow client cannot hold the accept thread (the
//    socket is then closed by a LingeringCloser, so that the 503 is not lost to a reset);
//  - stop_connections() shuts the read side of every open connection, so a client that sent
//    nothing or half a request cannot delay shutdown until its read timeout. Responses still
//    being written (a cancelled generation's answer) are not cut.
// Everything inside a request (parsing, routing, handlers, writing the response) is httplib's
// process_request; only the socket stream and the keep-alive loop are ours.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

#include "specula/server/connection_pool.h"
#include "specula/server/lingering_closer.h"

namespace specula::server {

class ConnectionServer final : public httplib::Server {
 public:
  // `refusal_body`: the JSON body of the 503 sent beyond `max_connections`.
  ConnectionServer(size_t max_connections, std::string refusal_body);

  // After binding: httplib 0.11 listens with a backlog of 5, so a burst of more connections than
  // its accept thread takes at once has its SYNs dropped and waits for the client's 1 s
  // retransmit. Returns false when the socket is not bound or listen() fails.
  bool widen_listen_backlog(int backlog);

  // After stop(): ends every connection that waits for (or is reading) a request; later ones are
  // closed unread. Idempotent.
  void stop_connections();

  // For a handler (handlers run on their connection's thread): whether the client of the request
  // this thread handles has closed its connection, so that work nobody will read can stop.
  static bool client_gone();
  // When the request this thread handles began to arrive (its first bytes were readable).
  static std::chrono::steady_clock::time_point request_start();

  int64_t open_connections() const { return stats_.open.load(); }
  uint64_t refused_connections() const { return stats_.refused.load(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Sends the 503 and hands the socket to closer_.
  void refuse(socket_t sock);
  // Registers `sock` for stop_connections(); false when stopping already.
  bool track(socket_t sock);
  void untrack(socket_t sock);
  // stop_connections() ran, or httplib's stop() closed the listening socket.
  bool stopping() const { return stopping_.load() || svr_sock_ == INVALID_SOCKET; }

  const size_t max_connections_;
  const std::string refusal_;  // the whole HTTP response
  ConnectionStats stats_;
  LingeringCloser closer_;
  std::mutex mutex_;
  std::unordered_set<socket_t> open_;
  std::atomic<bool> stopping_{false};
};

}  // namespace specula::server
