#pragma once
// Parsing and validation of OpenAI request bodies (POST /v1/chat/completions, /v1/completions)
// into plain structs. A pure function of (body text, limits): no engine, no I/O, so it can be
// fuzzed. Invalid input throws ApiError (400, naming the field); unknown fields are ignored.
// Token-level checks that need the model (prompt length, token ids against the vocabulary when
// RequestLimits::vocab_size is 0) happen later, in the HTTP layer.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/engine/option_limits.h"
#include "specula/grammar/grammar.h"
#include "specula/sample/sampling_params.h"
#include "specula/server/api_error.h"

namespace specula::server {

struct RequestLimits {
  size_t max_stop_strings = 16;
  size_t max_stop_length = 1024;                                     // bytes per stop string
  int max_top_logprobs = static_cast<int>(limits::kTopLogprobs.hi);  // chat top_logprobs, completions logprobs
  size_t max_logit_bias = 1024;                                      // entries
  size_t max_messages = 4096;
  int64_t max_tokens = limits::kMaxTokens.hi;  // an upper bound on max_tokens (the context clips it later)
  int64_t vocab_size = 0;                      // > 0: token ids (logit_bias keys, prompt ids) must be below it
};

// Fields both endpoints share.
struct GenerationParams {
  std::string model;                  // echoed back; any value is accepted (one model is served)
  std::optional<int64_t> max_tokens;  // max_completion_tokens wins over max_tokens
  SamplingOverrides sampling;         // only the fields the request sets
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  bool ignore_eos = false;           // vLLM extension
  std::optional<bool> speculative;   // specula extension: false = plain decoding
  std::optional<std::string> gamma;  // specula extension: "auto" or a non-negative integer
  // Constrained output (server/output_constraint.h): response_format, json_schema, guided_json,
  // grammar or guided_grammar, compiled; null when none.
  std::shared_ptr<const grammar::Grammar> grammar;
  std::string grammar_field;  // the field `grammar` came from
};

enum class ToolChoice { Auto, None, Required, Function };

struct ChatCompletionRequest {
  GenerationParams params;
  // The conversation as the chat template expects it: text content parts joined into a string,
  // assistant tool_calls with `arguments` parsed into an object, tool messages kept (the template
  // resolves their function name through tool_call_id).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null when absent (or tool_choice "none")
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string tool_choice_function;  // ToolChoice::Function
  // Under tool_choice "required": several calls in one answer (true) or exactly one. The tool-call
  // grammar (prepare_chat_job) enforces Required and Function; a named function is called once.
  bool parallel_tool_calls = true;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool logprobs = false;
  int top_logprobs = 0;
};

struct CompletionRequest {
  GenerationParams params;
  std::string prompt;                                 // text prompt (encoded with special tokens: <bos> first)
  std::optional<std::vector<int32_t>> prompt_tokens;  // a token-id prompt, used as given
  int logprobs = -1;                                  // -1: none; 0..max_top_logprobs alternatives per token
};

ChatCompletionRequest parse_chat_completion_request(std::string_view body, const RequestLimits& limits);
CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits);

// POST /tokenize: {"prompt": text} or {"messages": [...]} (chat-rendered), "add_special_tokens".
struct TokenizeRequest {
  std::optional<std::string> prompt;
  std::optional<ChatCompletionRequest> chat;  // when "messages" is given
  bool add_special_tokens = true;
};
TokenizeRequest parse_tokenize_request(std::string_view body, const RequestLimits& limits);

// POST /detokenize: {"tokens": [ids]}.
std::vector<int32_t> parse_detokenize_request(std::string_view body, const RequestLimits& limits);

}  // namespace specula::server
