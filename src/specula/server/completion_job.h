#pragma once
// One OpenAI generation request turned into engine work: prepare_* (on the HTTP thread, before
// queueing) renders and encodes the prompt, checks it against the context, resolves sampling and
// max_tokens, and throws ApiError for anything invalid; run_job (on the generation worker) runs
// the engine, streaming SSE chunks through `emit` or building the final JSON body.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/engine/engine.h"
#include "specula/server/metrics.h"
#include "specula/server/openai_request.h"
#include "specula/server/openai_response.h"

namespace specula::server {

struct PrepareOptions {
  int64_t max_tokens_default = 2048;  // when the request sets none (also bounded by the context)
};

struct PreparedJob {
  bool chat = true;  // chat.completion vs text_completion
  GenerationRequest generation;
  bool stream = false;
  bool include_usage = false;
  bool parse_tool_calls = false;  // chat with tools: Gemma tool calls become `tool_calls`
  int32_t tool_call_begin = -1;
  int32_t tool_call_end = -1;
  std::vector<std::string> stop;  // when parse_tool_calls, matched on the content only
  int logprobs = -1;              // top alternatives per token (-1: no logprobs)
  ResponseHeader header;
  std::chrono::steady_clock::time_point arrival;
};

PreparedJob prepare_chat_job(const Engine& engine, const ChatCompletionRequest& request, const PrepareOptions& options);
PreparedJob prepare_completion_job(const Engine& engine, const CompletionRequest& request,
                                   const PrepareOptions& options);

struct JobOutcome {
  int status = 200;
  ojson body;              // non-streaming: the response (or the error) body
  bool cancelled = false;  // the cancel flag ended the generation
  // For the access log.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double time_to_first_token_ms = -1.0;  // from the request's arrival; -1: no token
  // For the mismatched-drafter warning.
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
};

// Runs the generation. Streaming: every SSE event (chunks, the usage chunk, [DONE] or an error
// event) goes through `emit`; the outcome's body is unused. Returns after the engine returned.
JobOutcome run_job(Engine& engine, const PreparedJob& job, const std::atomic<bool>& cancelled,
                   const std::function<void(std::string)>& emit, Metrics& metrics);

}  // namespace specula::server
