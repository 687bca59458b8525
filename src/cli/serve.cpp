// `specula serve --model DIR [--draft DIR|lookup] [--host H] [--port P] [--api-key KEY] [--ctx N]
// [--max-queue N] [--max-connections N] ...`: the OpenAI-compatible HTTP server
// (server/http_server.h, docs/api.md).
// The listener starts first (GET /health answers 503 "loading"), then the model loads with progress
// lines on stderr, then a banner. SIGINT/SIGTERM are blocked in every thread and received by
// sigwait in one thread (no work in a signal handler): the server stops accepting, cancels the
// running and waiting generations, joins its threads and the program exits 0.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/kv_type_option.h"
#include "cli/model_path.h"
#include "specula/engine/engine.h"
#include "specula/kernels/isa.h"
#include "specula/model/packed_cache.h"
#include "specula/server/http_server.h"
#include "specula/util/error.h"

namespace specula::cli {

namespace {

struct ServeArgs {
  EngineOptions engine;
  std::string precision = "fast";
  std::string kv_type = "f32";
  server::ServerOptions server;
  bool access_log = true;
};

void print_line(const std::string& line, FILE* stream = stdout) {
  std::fputs((line + "\n").c_str(), stream);
  std::fflush(stream);
}

void run_serve(ServeArgs a) {
  a.engine.precision = parse_precision(a.precision);
  a.engine.kv_type = parse_kv_type(a.kv_type);
  a.engine.parallel = a.server.parallel;
  a.engine.packed_cache_dir = default_packed_cache_dir();
  if (a.access_log) a.server.access_log = [](const std::string& line) { print_line(line, stderr); };
  a.server.warning_log = [](const std::string& line) { print_line("specula serve: " + line, stderr); };

  // Block the shutdown signals before any thread starts, so every thread inherits the mask and only
  // sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client closing its socket must not kill the server

  server::HttpServer http(a.server);
  http.start();
  const std::string url = fmt::format("http://{}:{}", a.server.host, http.port());
  print_line(fmt::format("specula serve: listening on {} (loading the model)", url));

  enum Phase { kLoading, kServing, kLoadFailed };
  std::atomic<int> phase{kLoading};
  std::thread signal_thread([&] {
    int received = 0;
    sigwait(&signals, &received);
    if (phase == kLoadFailed) return;
    print_line(fmt::format("specula serve: {} received, shutting down", received == SIGINT ? "SIGINT" : "SIGTERM"),
               stderr);
    // Loading cannot be interrupted and holds no client work: leave at once.
    if (phase == kLoading) std::_Exit(0);
    http.stop();
  });

  std::unique_ptr<Engine> engine;
  try {
    engine = Engine::load(a.engine, [](const std::string& line) { print_line("specula serve: " + line, stderr); });
  } catch (...) {
    // Wake the signal thread so it can be joined, then report the load error (exit 1).
    phase = kLoadFailed;
    http.stop();
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    throw;
  }
  print_line(
      fmt::format("specula serve: model {} | draft {} | context {} tokens | kernels {} | {} threads | "
                  "{} parallel | {}",
                  engine->model_name(), engine->draft_description(), engine->max_context(), isa_name(active_isa()),
                  engine->threads(), engine->parallel(), url));
  phase = kServing;
  http.set_engine(std::move(engine));
  print_line(fmt::format("specula serve: ready on {}", url));
  signal_thread.join();
  print_line("specula serve: stopped", stderr);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (docs/api.md)");
  cmd->add_option("--model", args->engine.model_dir, "target checkpoint directory")
      ->required()
      ->transform(model_path());
  cmd->add_option("--draft", args->engine.draft,
                  "drafter checkpoint directory or .gguf file, or 'lookup' (prompt lookup)")
      ->transform(model_path());
  cmd->add_option("--gamma", args->engine.gamma,
                  "default draft length: N or 'auto' (a request may ask for up to the larger of 16 and N)")
      ->check(gamma_value())
      ->capture_default_str();
  cmd->add_option("--drafter-compat", args->engine.drafter_compat, "drafter conventions: ollama | mlx-bun")
      ->capture_default_str();
  cmd->add_option("--draft-quant", args->engine.draft_quant,
                  "drafter weights: auto (4-bit copies of a dense-head drafter's 16-bit matrices in fast and int8 "
                  "precision) | none (as stored) | q4 | q8 (affine copies made at load)")
      ->check(CLI::IsMember({"auto", "none", "q4", "q8"}))
      ->capture_default_str();
  cmd->add_option("--draft-head", args->engine.draft_head,
                  "drafter head of a dense-head drafter: stored (every vocabulary row each step) | clusters "
                  "(2048 clusters built at load; a step scores the tokens of the best 32)")
      ->check(CLI::IsMember({"stored", "clusters"}))
      ->capture_default_str();
  cmd->add_option("--chat-template", args->engine.chat_template_file,
                  "chat template file (overrides the checkpoint's)");
  cmd->add_option("--threads", args->engine.threads, "compute threads (0 = all cores)")
      ->check(in_range(limits::kThreads))
      ->capture_default_str();
  cmd->add_option("--ctx", args->engine.max_context, "context size in tokens (0 = the model's maximum)")
      ->check(in_range(limits::kContext))
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", args->engine.prefill_chunk, "prefill chunk size")
      ->check(in_range(limits::kPrefillChunk))
      ->capture_default_str();
  cmd->add_option("--precision", args->precision, "exact | fast | int8")->capture_default_str();
  add_kv_type_option(cmd, args->kv_type);
  cmd->add_flag("!--no-prompt-cache", args->engine.prompt_cache, "prefill every request from scratch");
  cmd->add_option("--host", args->server.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", args->server.port, "port (0 = any free port, printed at startup)")
      ->check(in_range(limits::kPort))
      ->capture_default_str();
  cmd->add_option("--api-key", args->server.api_key, "require 'Authorization: Bearer KEY' (except GET /health)");
  cmd->add_option("--cors-origin", args->server.cors_origins,
                  "let browser pages from this origin call the API (repeatable; '*': any origin)")
      ->delimiter(',');
  cmd->add_flag("!--no-access-log", args->access_log, "do not log one line per request to stderr");
  cmd->add_option("--parallel", args->server.parallel,
                  "generations decoding at once, batched into every forward (each with its own KV cache)")
      ->capture_default_str()
      ->check(in_range(limits::kParallel));
  cmd->add_option("--step-rows", args->engine.step_rows,
                  "rows of a batched step while streams decode: their rows first, a prompt chunk of the "
                  "earliest new request in the rest (0 = 32; with nothing decoding, up to --prefill-chunk)")
      ->capture_default_str()
      ->check(in_range(limits::kStepRows));
  cmd->add_option("--kv-budget-mb", args->engine.kv_budget_mb,
                  "KV-cache memory of all slots together: a request waits until what its cache can grow to "
                  "(prompt + max_tokens) fits, idle prompt caches are dropped to make room (0 = no limit)")
      ->capture_default_str()
      ->check(in_range(limits::kKvBudgetMb));
  cmd->add_option("--max-queue", args->server.max_queue,
                  "requests allowed to wait while --parallel are running (429 beyond)")
      ->check(in_range(limits::kMaxQueue))
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", args->server.max_body_bytes, "request body limit (413 beyond)")
      ->check(in_range(limits::kMaxBodyBytes))
      ->capture_default_str();
  CLI::Option* max_connections =
      cmd->add_option("--max-connections", args->server.max_connections,
                      "connections held at once, idle keep-alive ones included (503 beyond; default: "
                      "the larger of 64 and --max-queue + --parallel + 8)")
          ->check(in_range(limits::kMaxConnections));
  cmd->add_option("--read-timeout-s", args->server.read_timeout_s,
                  "seconds a client has to send its request (and each part of it)")
      ->check(in_range(limits::kReadTimeoutSeconds))
      ->capture_default_str();
  cmd->add_option("--max-tokens-default", args->server.max_tokens_default,
                  "max_tokens of a request that sets none (also bounded by the context)")
      ->check(in_range(limits::kMaxTokens))
      ->capture_default_str();
  cmd->callback([args, max_connections] {
    warn_if_threads_above_cores("--threads", args->engine.threads);
    check_context_flag("--ctx", args->engine.max_context, args->engine.model_dir);
    // Unset: room for every waiting and running request, and probes.
    if (max_connections->count() == 0) {
      args->server.max_connections = std::max<size_t>(
          args->server.max_connections, args->server.max_queue + static_cast<size_t>(args->server.parallel) + 8);
    }
    run_serve(*args);
  });
}

}  // namespace specula::cli
