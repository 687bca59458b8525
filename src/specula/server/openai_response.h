#pragma once
// OpenAI response bodies and Server-Sent-Events chunks for chat completions and completions,
// errors, usage and logprobs. Pure JSON building: no engine state.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/engine/engine.h"
#include "specula/server/api_error.h"

namespace specula::server {

using ojson = nlohmann::ordered_json;

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  uint64_t seed = 0;  // the sampling seed: the request's, or the fresh one an unseeded request got
};

struct ChatToolCall {
  std::string id;  // "call_<random>"
  std::string name;
  std::string arguments;  // a JSON object as text
};

// Identity of one response: every chunk of a stream repeats it.
struct ResponseHeader {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

// {"error": {"message", "type", "param", "code"}}
ojson error_json(const ApiError& error);
ojson usage_json(const Usage& usage);

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}; the top
// lists hold `top_n` entries (0: empty lists).
ojson chat_logprobs_json(const std::vector<TokenLogprobs>& logprobs, int top_n);
// Legacy completions logprobs: {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
// `text_offset` counts bytes from `offset_base`.
ojson completion_logprobs_json(const std::vector<TokenLogprobs>& logprobs, int top_n, int64_t offset_base);

ojson chat_completion_json(const ResponseHeader& h, const std::string& content, const std::vector<ChatToolCall>& calls,
                           const std::string& finish_reason, const ojson& logprobs, const Usage& usage);
// One streamed chunk: `delta` ({"role"}, {"content"}, {"tool_calls"} or {}), finish_reason null
// until the last one.
ojson chat_chunk_json(const ResponseHeader& h, const ojson& delta, const std::optional<std::string>& finish_reason,
                      const ojson& logprobs = nullptr);
// The delta of streamed tool calls (each complete, with its index).
ojson tool_calls_delta(const std::vector<ChatToolCall>& calls);

ojson completion_json(const ResponseHeader& h, const std::string& text, const std::string& finish_reason,
                      const ojson& logprobs, const Usage& usage);
ojson completion_chunk_json(const ResponseHeader& h, const std::string& text,
                            const std::optional<std::string>& finish_reason, const ojson& logprobs = nullptr);
// The final chunk of stream_options.include_usage: empty choices and the usage.
ojson usage_chunk_json(const ResponseHeader& h, const char* object, const Usage& usage);

// JSON text; invalid UTF-8 (never expected: the detokenizer completes characters) becomes U+FFFD
// instead of throwing.
std::string dump(const ojson& value);
// "data: <json>\n\n"
std::string sse_event(const ojson& value);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// A random id suffix of `n` alphanumerics.
std::string random_id(size_t n = 24);

}  // namespace specula::server
