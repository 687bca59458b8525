#pragma once
// The OpenAI-compatible HTTP server: routes, API key, body and connection limits, the generation
// queue (one worker per engine slot: `parallel` generations run at once, batched by the engine)
// and the server lifecycle. The listener starts before the model is loaded (/health answers
// 503 "loading" until set_engine), so clients and orchestrators can watch the load.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "specula/engine/engine.h"
#include "specula/engine/option_limits.h"
#include "specula/server/completion_job.h"
#include "specula/server/generation_queue.h"
#include "specula/server/metrics.h"
#include "specula/speculative/acceptance_check.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace specula::server {

class ConnectionServer;
struct PreparedJob;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;        // 0: any free port (see port())
  std::string api_key;    // empty: no authentication
  int parallel = 4;       // generations decoding at once (the engine's slots)
  size_t max_queue = 16;  // requests waiting while all `parallel` run
  size_t max_body_bytes = 8u << 20;
  // Connections held at once (each has its own thread); beyond it a new connection gets an
  // immediate 503 (server/connection_pool.h). At least max_queue + kReservedConnections.
  size_t max_connections = 64;
  int64_t read_timeout_s = 30;  // to send a request (and between its parts)
  int64_t max_tokens_default = 2048;
  RequestLimits limits;
  std::vector<std::string> cors_origins;  // origins browsers may call from ("*": any); empty: no CORS
  // Receives one line per request (server/access_log.h); empty: no access log.
  std::function<void(const std::string& line)> access_log;
  // Receives warnings about the server's work (a drafter whose drafts are never accepted:
  // speculative/acceptance_check.h); empty: none are given.
  std::function<void(const std::string& line)> warning_log;
};

// Connections beyond --max-queue + --parallel that max_connections must leave room for: a few
// health/metrics probes.
inline constexpr size_t kReservedConnections = 4;
inline constexpr int kMaxParallel = static_cast<int>(limits::kParallel.hi);
inline constexpr size_t kMaxConnectionsLimit = static_cast<size_t>(limits::kMaxConnections.hi);  // one thread each

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
  using Request = httplib::Request;
  using Response = httplib::Response;

  // Setup: socket and timeout settings, then the hooks every request passes (API key, CORS,
  // errors in OpenAI's shape, metrics and the access log), then one handler per route.
  void configure_connections();
  void install_hooks();
  void install_routes();

  // Hooks.
  bool answer_preflight(const Request& req, Response& res) const;
  bool refuse_unauthorized(const Request& req, Response& res) const;
  void add_cors_headers(const Request& req, Response& res) const;
  void shape_error(const Request& req, Response& res) const;
  void log_request(const Request& req, const Response& res);

  // Routes.
  void handle_health(Response& res) const;
  void handle_metrics(Response& res);
  void handle_models(Response& res) const;
  void handle_model(const Request& req, Response& res) const;
  void handle_generation(const Request& req, Response& res, bool chat);
  void handle_tokenize(const Request& req, Response& res) const;
  void handle_detokenize(const Request& req, Response& res) const;

  // Parts of the routes.
  Engine* loaded_engine(Response& res) const;  // null (and a 503 sent) while the model loads
  RequestLimits limits_for(const Engine& engine) const;
  void refuse_busy(Response& res) const;  // 429 queue full, or 503 when stopping
  void answer_whole(Engine& engine, const std::shared_ptr<PreparedJob>& job, Response& res);
  void answer_stream(Engine& engine, const std::shared_ptr<PreparedJob>& job, Response& res);
  // After each generation: the warning, once, when the drafts of the first requests were all rejected.
  void watch_acceptance(const Engine& engine, const JobOutcome& outcome);

  ServerOptions options_;
  std::unique_ptr<ConnectionServer> http_;
  std::unique_ptr<Engine> engine_owner_;
  std::atomic<Engine*> engine_{nullptr};
  GenerationQueue queue_;
  Metrics metrics_;
  NoAcceptanceWatch acceptance_watch_;
  std::thread listener_;
  int port_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace specula::server
