#include "specula/server/openai_response.h"

#include <cmath>
#include <random>

namespace specula::server {

namespace {

// JSON has no -inf; OpenAI reports impossible tokens as -9999.
double finite_logprob(double x) { return std::isfinite(x) ? x : -9999.0; }

ojson bytes_of(const std::string& text) {
  ojson out = ojson::array();
  for (const unsigned char c : text) out.push_back(static_cast<int>(c));
  return out;
}

ojson choice_logprobs_or_null(const ojson& logprobs) { return logprobs.is_null() ? ojson(nullptr) : logprobs; }

}  // namespace

ojson error_json(const ApiError& error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? ojson(nullptr) : ojson(error.param)},
            {"code", error.code.empty() ? ojson(nullptr) : ojson(error.code)}}}};
}

ojson usage_json(const Usage& u) {
  return {
      {"prompt_tokens", u.prompt_tokens},
      {"completion_tokens", u.completion_tokens},
      {"total_tokens", u.prompt_tokens + u.completion_tokens},
      {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
      {"specula", {{"drafted_tokens", u.drafted_tokens}, {"accepted_tokens", u.accepted_tokens}, {"seed", u.seed}}}};
}

ojson chat_logprobs_json(const std::vector<TokenLogprobs>& logprobs, int top_n) {
  ojson content = ojson::array();
  for (const TokenLogprobs& t : logprobs) {
    ojson top = ojson::array();
    for (size_t i = 0; i < t.top.size() && static_cast<int>(i) < top_n; ++i) {
      top.push_back({{"token", t.top[i].text},
                     {"logprob", finite_logprob(t.top[i].logprob)},
                     {"bytes", bytes_of(t.top[i].text)}});
    }
    content.push_back({{"token", t.chosen.text},
                       {"logprob", finite_logprob(t.chosen.logprob)},
                       {"bytes", bytes_of(t.chosen.text)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

ojson completion_logprobs_json(const std::vector<TokenLogprobs>& logprobs, int top_n, int64_t offset_base) {
  ojson tokens = ojson::array(), token_logprobs = ojson::array(), top = ojson::array(), offsets = ojson::array();
  int64_t offset = offset_base;
  for (const TokenLogprobs& t : logprobs) {
    tokens.push_back(t.chosen.text);
    token_logprobs.push_back(finite_logprob(t.chosen.logprob));
    ojson alternatives = ojson::object();
    for (size_t i = 0; i < t.top.size() && static_cast<int>(i) < top_n; ++i) {
      alternatives[t.top[i].text] = finite_logprob(t.top[i].logprob);
    }
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.chosen.text.size());
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

ojson tool_calls_delta(const std::vector<ChatToolCall>& calls) {
  ojson out = ojson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back({{"index", i},
                   {"id", calls[i].id},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  }
  return out;
}

ojson chat_completion_json(const ResponseHeader& h, const std::string& content, const std::vector<ChatToolCall>& calls,
                           const std::string& finish_reason, const ojson& logprobs, const Usage& usage) {
  ojson message = {{"role", "assistant"},
                   {"content", content.empty() && !calls.empty() ? ojson(nullptr) : ojson(content)}};
  if (!calls.empty()) {
    ojson list = tool_calls_delta(calls);
    for (auto& c : list) c.erase("index");
    message["tool_calls"] = std::move(list);
  }
  return {{"id", h.id},
          {"object", "chat.completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", ojson::array({{{"index", 0},
                                     {"message", std::move(message)},
                                     {"logprobs", choice_logprobs_or_null(logprobs)},
                                     {"finish_reason", finish_reason}}})},
          {"usage", usage_json(usage)}};
}

ojson chat_chunk_json(const ResponseHeader& h, const ojson& delta, const std::optional<std::string>& finish_reason,
                      const ojson& logprobs) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices", ojson::array({{{"index", 0},
                                     {"delta", delta},
                                     {"logprobs", choice_logprobs_or_null(logprobs)},
                                     {"finish_reason", finish_reason ? ojson(*finish_reason) : ojson(nullptr)}}})}};
}

ojson completion_json(const ResponseHeader& h, const std::string& text, const std::string& finish_reason,
                      const ojson& logprobs, const Usage& usage) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", ojson::array({{{"index", 0},
                                     {"text", text},
                                     {"logprobs", choice_logprobs_or_null(logprobs)},
                                     {"finish_reason", finish_reason}}})},
          {"usage", usage_json(usage)}};
}

ojson completion_chunk_json(const ResponseHeader& h, const std::string& text,
                            const std::optional<std::string>& finish_reason, const ojson& logprobs) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", ojson::array({{{"index", 0},
                                     {"text", text},
                                     {"logprobs", choice_logprobs_or_null(logprobs)},
                                     {"finish_reason", finish_reason ? ojson(*finish_reason) : ojson(nullptr)}}})}};
}

ojson usage_chunk_json(const ResponseHeader& h, const char* object, const Usage& usage) {
  return {{"id", h.id},       {"object", object},          {"created", h.created},
          {"model", h.model}, {"choices", ojson::array()}, {"usage", usage_json(usage)}};
}

std::string dump(const ojson& value) { return value.dump(-1, ' ', false, ojson::error_handler_t::replace); }

std::string sse_event(const ojson& value) { return "data: " + dump(value) + "\n\n"; }

std::string random_id(size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string out(n, 'x');
  for (char& c : out) c = kAlphabet[pick(rng)];
  return out;
}

}  // namespace specula::server
