// Fuzz entry: the OpenAI request parsers of the HTTP server (server/openai_request.h) on arbitrary
// bodies. Byte 0 picks the endpoint and the limits; the rest is the body. Bad input may throw
// ApiError (the contract) or specula::Error (the HTTP layer answers both with a 4xx); anything
// else escapes. An accepted request must respect the limits it was parsed under, its JSON parts
// must be no deeper than the body's nesting limit allows and must serialize (the chat template
// and the responses dump them); the entry aborts if not.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_entries.h"
#include "specula/sample/sampling_params.h"
#include "specula/server/openai_request.h"
#include "specula/speculative/gamma_choice.h"
#include "specula/util/error.h"

namespace specula::fuzz {
namespace {

using server::RequestLimits;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "openai_request: accepted request breaks its limits: %s\n", what);
  std::abort();
}

void check_params(const server::GenerationParams& p, const RequestLimits& limits) {
  if (p.stop.size() > limits.max_stop_strings) broken("too many stop strings");
  for (const std::string& s : p.stop)
    if (s.size() > limits.max_stop_length) broken("stop string too long");
  if (p.max_tokens && (*p.max_tokens < 0 || *p.max_tokens > limits.max_tokens)) broken("max_tokens out of range");
  if (p.sampling.logit_bias) {
    if (p.sampling.logit_bias->size() > limits.max_logit_bias) broken("too many logit_bias entries");
    for (const auto& [id, bias] : *p.sampling.logit_bias)
      if (id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size)) broken("logit_bias id outside the vocabulary");
  }
  if (p.gamma) (void)parse_gamma_choice(*p.gamma);  // accepted text must mean something
  try {                                             // what the server does next with the sampling fields
    const SamplingParams s = apply_overrides(SamplingParams{}, p.sampling);
    if (limits.vocab_size > 0) validate_for_vocab(s, limits.vocab_size);
  } catch (const specula::Error&) {
  }
}

// The parser refuses bodies nested deeper than 64 levels so that later recursive walks (dump,
// copies, the chat template) stay shallow. JSON it parses out of strings (tool-call arguments)
// must keep that promise too; a few levels of slack cover the structure the parser wraps around.
constexpr size_t kMaxAcceptedDepth = 64 + 8;

// Nesting depth without recursion (the harness must not overflow on what it checks).
size_t depth(const nlohmann::ordered_json& root) {
  std::vector<std::pair<const nlohmann::ordered_json*, size_t>> stack = {{&root, 1}};
  size_t deepest = 0;
  while (!stack.empty()) {
    const auto [v, d] = stack.back();
    stack.pop_back();
    deepest = std::max(deepest, d);
    if (d > kMaxAcceptedDepth) return d;
    if (v->is_structured())
      for (const auto& child : *v) stack.push_back({&child, d + 1});
  }
  return deepest;
}

void check_chat(const server::ChatCompletionRequest& r, const RequestLimits& limits) {
  check_params(r.params, limits);
  if (!r.messages.is_array() || r.messages.size() > limits.max_messages) broken("messages");
  if (r.top_logprobs < 0 || r.top_logprobs > limits.max_top_logprobs) broken("top_logprobs");
  for (const auto* part : {&r.messages, &r.tools, &r.chat_template_kwargs})
    if (depth(*part) > kMaxAcceptedDepth) broken("JSON nested deeper than the body limit allows");
  (void)r.messages.dump();
  (void)r.tools.dump();
  (void)r.chat_template_kwargs.dump();
}

void run(uint8_t selector, std::string_view body) {
  RequestLimits limits;
  if (selector & 4) limits.vocab_size = 262144;
  if (selector & 8) {  // small limits, so that the fuzzer reaches every bound
    limits.max_stop_strings = 2;
    limits.max_stop_length = 8;
    limits.max_top_logprobs = 3;
    limits.max_logit_bias = 2;
    limits.max_messages = 3;
    limits.max_tokens = 100;
    if (limits.vocab_size == 0) limits.vocab_size = 512;
  }
  switch (selector & 3) {
    case 0: check_chat(server::parse_chat_completion_request(body, limits), limits); break;
    case 1: {
      const server::CompletionRequest r = server::parse_completion_request(body, limits);
      check_params(r.params, limits);
      if (r.logprobs < -1 || r.logprobs > limits.max_top_logprobs) broken("logprobs");
      if (r.prompt_tokens)
        for (int32_t id : *r.prompt_tokens)
          if (id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size)) broken("prompt token id");
      break;
    }
    case 2: {
      const server::TokenizeRequest r = server::parse_tokenize_request(body, limits);
      if (r.chat) check_chat(*r.chat, limits);
      break;
    }
    case 3:
      for (int32_t id : server::parse_detokenize_request(body, limits))
        if (id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size)) broken("detokenize id");
      break;
  }
}

}  // namespace

int fuzz_openai_request(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    run(data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  } catch (const server::ApiError& e) {
    if (e.status < 400 || e.status > 499) broken("an ApiError that is not a 4xx");
    if (std::getenv("SPECULA_FUZZ_VERBOSE")) std::fprintf(stderr, "openai_request: %d %s\n", e.status, e.what());
  } catch (const specula::Error& e) {
    if (std::getenv("SPECULA_FUZZ_VERBOSE")) std::fprintf(stderr, "openai_request: %s\n", e.what());
  }
  return 0;
}

}  // namespace specula::fuzz
