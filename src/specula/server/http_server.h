#pragma once
// The OpenAI-compatible HTTP server: routes, API key, body and connection limits, the generation
// queue (one worker per engine slot: `parallel` generations run at once, batched by the engine)
// and the server lifecycle. The listener starts before the model is loaded (/health answers
// 503 "loading" until set_engine), so clients and orchestrators can watch the load.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "specula/engine/engine.h"
#include "specula/server/completion_job.h"
#include "specula/server/generation_queue.h"
#include "specula/server/metrics.h"

namespace specula::server {

class ConnectionServer;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                         // 0: any free port (see port())
  std::string api_key;                     // empty: no authentication
  int parallel = 4;                        // generations decoding at once (the engine's slots)
  size_t max_queue = 16;                   // requests waiting while all `parallel` run
  size_t max_body_bytes = 8u << 20;
  // Connections held at once (each has its own thread); beyond it a new connection gets an
  // immediate 503 (server/connection_pool.h). At least max_queue + kReservedConnections.
  size_t max_connections = 64;
  int64_t read_timeout_s = 30;             // to send a request (and between its parts)
  int64_t max_tokens_default = 2048;
  RequestLimits limits;
};

// Connections beyond --max-queue + --parallel that max_connections must leave room for: a few
// health/metrics probes.
inline constexpr size_t kReservedConnections = 4;
inline constexpr int kMaxParallel = 256;
inline constexpr size_t kMaxConnectionsLimit = 4096;  // one thread each

class HttpServer {
 public:
  // Throws specula::Error when an option is out of range (naming the flag and the limit).
  explicit HttpServer(ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket (throws specula::Error naming the address) and serves on a
  // background thread.
  void start();
  int port() const { return port_; }
  // The model is ready: generation endpoints start answering.
  void set_engine(std::unique_ptr<Engine> engine);
  // Stops accepting, cancels the running and waiting generations, joins every thread. Idempotent.
  void stop();

  Metrics& metrics() { return metrics_; }

 private:
  void install_routes();

  ServerOptions options_;
  std::unique_ptr<ConnectionServer> http_;
  std::unique_ptr<Engine> engine_owner_;
  std::atomic<Engine*> engine_{nullptr};
  GenerationQueue queue_;
  Metrics metrics_;
  std::thread listener_;
  int port_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace specula::server
