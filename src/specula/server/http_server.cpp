#include "specula/server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "specula/model/target_model.h"
#include "specula/server/access_log.h"
#include "specula/server/connection_server.h"
#include "specula/server/cors.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"
#include "specula/util/printable.h"

namespace specula::server {

namespace {

// Compares the Authorization header with the expected one in time that depends only on their
// lengths, not on where they first differ (no timing oracle for the key).
bool same_secret(const std::string& given, const std::string& expected) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i]) ^
            static_cast<unsigned char>(expected[i % std::max<size_t>(expected.size(), 1)]);
  return diff == 0;
}

// A client that stops reading a response frees its thread after this (sending half a request: the
// read timeout, ServerOptions::read_timeout_s).
constexpr time_t kWriteTimeoutSeconds = 30;
// Connections the kernel completes before the accept thread takes them (nginx's default). The
// accept thread never blocks (over --max-connections it refuses at once), so this only absorbs
// bursts.
constexpr int kListenBacklog = 511;

using Clock = std::chrono::steady_clock;
using httplib::Request;
using httplib::Response;

void send_json(Response& res, int status, const ojson& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(Response& res, const ApiError& error) { send_json(res, error.status, error_json(error)); }

// Metrics label of a path: the known routes, everything else "other" (bounded cardinality).
std::string endpoint_label(const std::string& path) {
  for (const char* known :
       {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/tokenize", "/detokenize"}) {
    if (path == known) return known;
  }
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// SSE events from the generation worker to the HTTP thread that writes them.
struct StreamChannel {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::string> events;
  bool closed = false;

  void push(std::string event) {
    {
      std::lock_guard lock(mutex);
      events.push_back(std::move(event));
    }
    cv.notify_all();
  }
  void close() {
    {
      std::lock_guard lock(mutex);
      closed = true;
    }
    cv.notify_all();
  }
};

struct CloseOnExit {
  StreamChannel& channel;
  ~CloseOnExit() { channel.close(); }
};

// How often a waiting stream checks its client (an SSE comment line): a write to a closed
// connection fails, and the request is cancelled (dropped from the queue if it still waits).
constexpr auto kStreamPoll = std::chrono::milliseconds(100);
constexpr auto kKeepAliveEvery = std::chrono::milliseconds(500);

const ServerOptions& checked(const ServerOptions& o) {
  if (o.parallel < 1 || o.parallel > kMaxParallel)
    fail("serve: --parallel {} must be in [1, {}]", o.parallel, kMaxParallel);
  const size_t needed = o.max_queue + static_cast<size_t>(o.parallel) + kReservedConnections;
  if (o.max_connections < needed) {
    fail(
        "serve: --max-connections {} is too small for --max-queue {} and --parallel {}: it must be at least {} "
        "(the waiting requests, the running ones and a few health/metrics probes)",
        o.max_connections, o.max_queue, o.parallel, needed);
  }
  if (o.max_connections > kMaxConnectionsLimit) {
    fail("serve: --max-connections {} is above the limit of {} (each connection has its own thread)", o.max_connections,
         kMaxConnectionsLimit);
  }
  if (!limits::contains(limits::kReadTimeoutSeconds, o.read_timeout_s)) {
    fail("serve: --read-timeout-s {} is not in {} seconds", o.read_timeout_s,
         limits::describe(limits::kReadTimeoutSeconds));
  }
  return o;
}

// One model object of GET /v1/models and /v1/models/{id}.
ojson model_json(const Engine& engine) {
  return {{"id", engine.model_name()},
          {"object", "model"},
          {"created", 0},
          {"owned_by", "specula"},
          {"max_model_len", engine.max_context()},
          {"draft", engine.draft_description()}};
}

// The status of a request whose client hung up before its answer (nginx's 499).
constexpr int kClientClosedRequest = 499;

// The generation the request on this thread started, for the access log (the logger runs on the
// same thread once the response is written).
struct GenerationOfRequest {
  std::shared_ptr<GenerationQueue::Job> handle;
  std::shared_ptr<const JobOutcome> outcome;
};
thread_local GenerationOfRequest t_generation;

std::string too_many_connections_body(size_t max_connections) {
  return dump(error_json(ApiError(
      503, "server_error",
      fmt::format("the server holds its maximum of {} connections (--max-connections); retry later", max_connections),
      "", "too_many_connections")));
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : options_(checked(options)),
      http_(std::make_unique<ConnectionServer>(options_.max_connections,
                                               too_many_connections_body(options_.max_connections))),
      queue_(options_.max_queue, static_cast<size_t>(options_.parallel)) {
  install_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ < 0) fail("serve: cannot listen on {} (any port)", options_.host);
  } else {
    if (!http_->bind_to_port(options_.host, options_.port)) {
      fail("serve: cannot listen on {}:{} (address in use, or not allowed)", options_.host, options_.port);
    }
    port_ = options_.port;
  }
  if (!http_->widen_listen_backlog(kListenBacklog)) {
    fail("serve: cannot set the listen backlog of {}:{} to {}", options_.host, port_, kListenBacklog);
  }
  listener_ = std::thread([this] { http_->listen_after_bind(); });
}

void HttpServer::set_engine(std::unique_ptr<Engine> engine) {
  engine_owner_ = std::move(engine);
  engine_.store(engine_owner_.get());
}

void HttpServer::stop() {
  if (stopped_.exchange(true)) return;
  queue_.shutdown();  // cancels the running generation, drops the waiting ones
  http_->stop();      // closes the listening socket
  // Connections that wait for a request end now rather than at their read or keep-alive timeout.
  http_->stop_connections();
  if (listener_.joinable()) listener_.join();
}

// ---- setup ----

void HttpServer::configure_connections() {
  httplib::Server& http = *http_;
  http.set_payload_max_length(options_.max_body_bytes);
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port and
  // silently share its traffic; a taken port must be an error.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_keep_alive_timeout(2);
  http.set_read_timeout(static_cast<time_t>(options_.read_timeout_s), 0);
  http.set_write_timeout(kWriteTimeoutSeconds, 0);
}

void HttpServer::install_hooks() {
  httplib::Server& http = *http_;
  using Handled = httplib::Server::HandlerResponse;
  http.set_pre_routing_handler([this](const Request& req, Response& res) {
    t_generation = {};
    const bool answered = answer_preflight(req, res) || refuse_unauthorized(req, res);
    return answered ? Handled::Handled : Handled::Unhandled;
  });
  // Runs before every response is written, errors included, so browsers can read those too.
  http.set_post_routing_handler([this](const Request& req, Response& res) { add_cors_headers(req, res); });
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
    if (!res.body.empty()) return Handled::Unhandled;
    shape_error(req, res);
    return Handled::Handled;
  }));
  http.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "server_error", what));
  });
  // After the response is written (a stream: after its last chunk).
  http.set_logger([this](const Request& req, const Response& res) { log_request(req, res); });
}

void HttpServer::install_routes() {
  configure_connections();
  install_hooks();
  httplib::Server& http = *http_;
  http.Get("/health", [this](const Request&, Response& res) { handle_health(res); });
  http.Get("/metrics", [this](const Request&, Response& res) { handle_metrics(res); });
  http.Get("/v1/models", [this](const Request&, Response& res) { handle_models(res); });
  http.Get(R"(/v1/models/(.+))", [this](const Request& req, Response& res) { handle_model(req, res); });
  http.Post("/v1/chat/completions", [this](const Request& req, Response& res) { handle_generation(req, res, true); });
  http.Post("/v1/completions", [this](const Request& req, Response& res) { handle_generation(req, res, false); });
  http.Post("/tokenize", [this](const Request& req, Response& res) { handle_tokenize(req, res); });
  http.Post("/detokenize", [this](const Request& req, Response& res) { handle_detokenize(req, res); });
}

// ---- hooks ----

// A browser's preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin: 204
// with what it may send. It carries no credentials, so it is answered before the API key check.
bool HttpServer::answer_preflight(const Request& req, Response& res) const {
  if (req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) return false;
  if (allowed_origin(options_.cors_origins, req.get_header_value("Origin")).empty()) return false;
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", kCorsAllowMethods);
  res.set_header("Access-Control-Allow-Headers", kCorsAllowHeaders);
  res.set_header("Access-Control-Max-Age", kCorsMaxAgeSeconds);
  return true;
}

bool HttpServer::refuse_unauthorized(const Request& req, Response& res) const {
  if (options_.api_key.empty() || req.path == "/health") return false;
  if (same_secret(req.get_header_value("Authorization"), "Bearer " + options_.api_key)) return false;
  send_error(res, ApiError(401, "authentication_error",
                           "missing or invalid API key: send the header 'Authorization: Bearer <key>'", "",
                           "invalid_api_key"));
  return true;
}

void HttpServer::add_cors_headers(const Request& req, Response& res) const {
  if (options_.cors_origins.empty()) return;
  const std::string origin = allowed_origin(options_.cors_origins, req.get_header_value("Origin"));
  if (origin.empty()) return;
  res.set_header("Access-Control-Allow-Origin", origin);
  if (origin != "*") res.set_header("Vary", "Origin");
}

// Statuses httplib produces by itself (unknown route, body too large): OpenAI's error shape.
void HttpServer::shape_error(const Request& req, Response& res) const {
  if (res.status == 404) {
    send_error(res, ApiError(404, "invalid_request_error", fmt::format("no route for {} {}", req.method, req.path), "",
                             "not_found"));
  } else if (res.status == 413) {
    send_error(res, ApiError(413, "invalid_request_error",
                             fmt::format("the request body is larger than the limit of {} bytes (--max-body-bytes)",
                                         options_.max_body_bytes),
                             "", "payload_too_large"));
  } else {
    send_error(res, ApiError(res.status, "invalid_request_error", fmt::format("HTTP status {}", res.status)));
  }
}

void HttpServer::log_request(const Request& req, const Response& res) {
  metrics_.count_request(endpoint_label(req.path), res.status);
  const GenerationOfRequest generation = std::exchange(t_generation, {});
  if (!options_.access_log) return;
  AccessRecord record;
  record.remote_addr = req.remote_addr;
  record.method = req.method;
  record.path = req.path;
  record.status = res.status;
  if (generation.handle) {
    generation.handle->wait();  // a client that hung up: its cancelled generation ends within a step
    record.prompt_tokens = generation.outcome->prompt_tokens;
    record.completion_tokens = generation.outcome->completion_tokens;
    record.time_to_first_token_ms = generation.outcome->time_to_first_token_ms;
  }
  record.duration_ms = ms_since(ConnectionServer::request_start());
  options_.access_log(access_log_line(record, std::time(nullptr)));
}

// ---- routes ----

void HttpServer::handle_health(Response& res) const {
  if (engine_.load() == nullptr)
    send_json(res, 503, {{"status", "loading"}});
  else
    send_json(res, 200, {{"status", "ok"}});
}

void HttpServer::handle_metrics(Response& res) {
  const Engine* engine = engine_.load();
  const int64_t waiting = static_cast<int64_t>(queue_.waiting()) + (engine ? engine->waiting() : 0);
  metrics_.set_queue_depth(waiting);
  metrics_.set_load(engine ? engine->running() : 0, waiting, engine ? engine->kv_utilization() : 0.0);
  std::string text = metrics_.render();
  text += fmt::format(
      "# HELP specula_http_connections Open HTTP connections (this one included).\n"
      "# TYPE specula_http_connections gauge\n"
      "specula_http_connections {}\n"
      "# HELP specula_http_connections_refused_total Connections refused with 503 at --max-connections.\n"
      "# TYPE specula_http_connections_refused_total counter\n"
      "specula_http_connections_refused_total {}\n",
      http_->open_connections(), http_->refused_connections());
  res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
}

void HttpServer::handle_models(Response& res) const {
  const Engine* engine = loaded_engine(res);
  if (engine == nullptr) return;
  send_json(res, 200, {{"object", "list"}, {"data", ojson::array({model_json(*engine)})}});
}

void HttpServer::handle_model(const Request& req, Response& res) const {
  const Engine* engine = loaded_engine(res);
  if (engine == nullptr) return;
  const std::string id = req.matches[1];
  if (id != engine->model_name()) {
    send_error(res, ApiError(404, "invalid_request_error",
                             fmt::format("the model '{}' does not exist: this server serves '{}'", printable_name(id),
                                         engine->model_name()),
                             "model", "model_not_found"));
    return;
  }
  send_json(res, 200, model_json(*engine));
}

void HttpServer::handle_generation(const Request& req, Response& res, bool chat) {
  Engine* engine = loaded_engine(res);
  if (engine == nullptr) return;
  std::shared_ptr<PreparedJob> job;
  try {
    const PrepareOptions prepare{options_.max_tokens_default};
    const RequestLimits limits = limits_for(*engine);
    job = std::make_shared<PreparedJob>(
        chat ? prepare_chat_job(*engine, parse_chat_completion_request(req.body, limits), prepare)
             : prepare_completion_job(*engine, parse_completion_request(req.body, limits), prepare));
  } catch (const ApiError& e) {
    send_error(res, e);
    return;
  } catch (const specula::Error& e) {
    send_error(res, invalid_request(e.what(), ""));
    return;
  }
  if (job->stream)
    answer_stream(*engine, job, res);
  else
    answer_whole(*engine, job, res);
}

void HttpServer::handle_tokenize(const Request& req, Response& res) const {
  const Engine* engine = loaded_engine(res);
  if (engine == nullptr) return;
  try {
    const TokenizeRequest t = parse_tokenize_request(req.body, limits_for(*engine));
    if (engine->tokenizer() == nullptr)
      throw invalid_request("the served checkpoint has no usable tokenizer: " + engine->no_tokenizer_reason(), "");
    std::vector<int32_t> ids;
    if (t.chat) {
      ids = engine->encode_chat(t.chat->messages, t.chat->tools, t.chat->chat_template_kwargs);
    } else {
      ids = engine->encode(*t.prompt, t.add_special_tokens);
    }
    send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine->max_context()}});
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const specula::Error& e) {
    send_error(res, invalid_request(e.what(), ""));
  }
}

void HttpServer::handle_detokenize(const Request& req, Response& res) const {
  const Engine* engine = loaded_engine(res);
  if (engine == nullptr) return;
  try {
    const std::vector<int32_t> ids = parse_detokenize_request(req.body, limits_for(*engine));
    if (engine->tokenizer() == nullptr)
      throw invalid_request("the served checkpoint has no usable tokenizer: " + engine->no_tokenizer_reason(), "");
    send_json(res, 200, {{"prompt", engine->decode(ids, /*skip_special_tokens=*/false)}});
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const specula::Error& e) {
    send_error(res, invalid_request(e.what(), ""));
  }
}

// ---- parts of the routes ----

Engine* HttpServer::loaded_engine(Response& res) const {
  Engine* engine = engine_.load();
  if (engine == nullptr) {
    send_error(res, ApiError(503, "server_error", "the model is still loading; retry when GET /health says ok", "",
                             "model_loading"));
  }
  return engine;
}

RequestLimits HttpServer::limits_for(const Engine& engine) const {
  RequestLimits limits = options_.limits;
  limits.vocab_size = engine.model().vocab_size();
  return limits;
}

void HttpServer::refuse_busy(Response& res) const {
  if (stopped_) {
    send_error(res, ApiError(503, "server_error", "the server is shutting down", "", "shutting_down"));
  } else {
    send_error(res, ApiError(429, "rate_limit_error",
                             fmt::format("the generation queue is full ({} waiting, --max-queue); retry later",
                                         options_.max_queue),
                             "", "queue_full"));
  }
}

// Prompt lookup drafts from the prompt's own text: rejecting them all says nothing about a model.
void HttpServer::watch_acceptance(const Engine& engine, const JobOutcome& outcome) {
  const std::string& draft = engine.options().draft;
  if (!options_.warning_log || draft.empty() || draft == "lookup") return;
  const std::string warning = acceptance_watch_.add(outcome.drafted_tokens, outcome.accepted_tokens, draft);
  if (!warning.empty()) options_.warning_log(warning);
}

// A non-streaming answer: the HTTP thread waits for the generation and watches the connection
// meanwhile, so a client that hangs up cancels its generation instead of letting it run on.
void HttpServer::answer_whole(Engine& engine, const std::shared_ptr<PreparedJob>& job, Response& res) {
  auto outcome = std::make_shared<JobOutcome>();
  auto handle = queue_.submit([this, &engine, job, outcome](const std::atomic<bool>& cancelled) {
    *outcome = run_job(engine, *job, cancelled, {}, metrics_);
    watch_acceptance(engine, *outcome);
  });
  if (handle == nullptr) return refuse_busy(res);
  t_generation = {handle, outcome};
  std::optional<bool> ran;
  bool client_gone = false;
  while (!(ran = handle->wait_for(kStreamPoll))) {
    if (!client_gone && ConnectionServer::client_gone()) {
      client_gone = true;
      queue_.cancel(handle);
    }
  }
  if (client_gone) {
    // Nobody reads this; the status is for the metrics and the access log (nginx's convention).
    send_error(res, ApiError(kClientClosedRequest, "invalid_request_error", "the client closed the connection", "",
                             "client_closed_request"));
  } else if (!*ran) {
    send_error(res, ApiError(503, "server_error", "the server is shutting down", "", "shutting_down"));
  } else if (!handle->error().empty()) {
    send_error(res, ApiError(500, "server_error", handle->error()));
  } else {
    send_json(res, outcome->status, outcome->body);
  }
}

// A streaming answer: the generation worker pushes SSE events into a channel, the HTTP thread
// writes them; a failed write (the client went away) cancels the generation.
void HttpServer::answer_stream(Engine& engine, const std::shared_ptr<PreparedJob>& job, Response& res) {
  auto channel = std::make_shared<StreamChannel>();
  auto outcome = std::make_shared<JobOutcome>();
  auto handle = queue_.submit([this, &engine, job, channel, outcome](const std::atomic<bool>& cancelled) {
    CloseOnExit closer{*channel};
    *outcome = run_job(
        engine, *job, cancelled, [&channel](std::string event) { channel->push(std::move(event)); }, metrics_);
    watch_acceptance(engine, *outcome);
  });
  if (handle == nullptr) return refuse_busy(res);
  t_generation = {handle, outcome};
  res.set_header("Cache-Control", "no-cache");
  auto last_write = std::make_shared<Clock::time_point>(Clock::now());
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, channel, handle, last_write](size_t, httplib::DataSink& sink) {
        std::deque<std::string> events;
        bool closed = false;
        {
          std::unique_lock lock(channel->mutex);
          channel->cv.wait_for(lock, kStreamPoll, [&] { return !channel->events.empty() || channel->closed; });
          events.swap(channel->events);
          closed = channel->closed;
        }
        auto write = [&](const std::string& text) {
          if (sink.write(text.data(), text.size())) return true;
          queue_.cancel(handle);  // the client went away
          return false;
        };
        for (const std::string& e : events) {
          if (!write(e)) return false;
        }
        if (!events.empty()) *last_write = Clock::now();
        if (closed) {
          sink.done();
          return true;
        }
        if (const auto ran = handle->wait_for(std::chrono::seconds(0)); ran && !*ran) {
          // Dropped from the queue without running (shutdown).
          write(
              sse_event(error_json(ApiError(503, "server_error", "the server is shutting down", "", "shutting_down"))));
          write(kSseDone);
          sink.done();
          return true;
        }
        if (Clock::now() - *last_write >= kKeepAliveEvery) {
          if (!write(": keep-alive\n\n")) return false;
          *last_write = Clock::now();
        }
        return true;
      },
      [this, handle](bool success) {
        if (!success) queue_.cancel(handle);
      });
}

}  // namespace specula::server
