#include "specula/text/detokenizer.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "specula/text/tokenizer.h"
#include "specula/text/tokenizer_decoders.h"

namespace specula::text {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD: what a partial character decodes to

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, DetokenizerOptions options)
    : tokenizer_(tokenizer),
      options_(std::move(options)),
      hidden_(options_.hidden_ids.begin(), options_.hidden_ids.end()) {}

std::string StreamingDetokenizer::push(int32_t id) {
  if (hidden_.count(id) != 0) return {};
  window_.push_back(id);
  const std::string decoded = tokenizer_.decode(window_, options_.skip_special_tokens);
  // A trailing U+FFFD may be a character still missing bytes: wait for the next id.
  if (decoded.size() <= window_text_.size() || ends_with(decoded, kReplacement)) return {};
  // Decoders are concatenative, so the released text is a prefix; if a decoder ever rewrites
  // earlier text, release only what follows the common prefix.
  size_t common = 0;
  const size_t limit = std::min(decoded.size(), window_text_.size());
  while (common < limit && decoded[common] == window_text_[common]) ++common;
  std::string fresh = decoded.substr(std::max(common, window_text_.size()));
  all_ += fresh;
  // Keep the newest id as context for the next one (decoders may treat a sequence start
  // specially), unless it is a byte token: a lone continuation byte would spoil the next run.
  const std::optional<std::string> last = tokenizer_.id_to_token(window_.back());
  if (last && byte_fallback_value(*last) < 0) {
    window_.erase(window_.begin(), window_.end() - 1);
    window_text_ = tokenizer_.decode(window_, options_.skip_special_tokens);
  } else {
    window_.clear();
    window_text_.clear();
  }
  return fresh;
}

std::string StreamingDetokenizer::finish() {
  std::string rest;
  if (!window_.empty()) {
    const std::string decoded = tokenizer_.decode(window_, options_.skip_special_tokens);
    if (decoded.size() > window_text_.size()) rest = decoded.substr(window_text_.size());
  }
  all_ += rest;
  window_.clear();
  window_text_.clear();
  return rest;
}

void StreamingDetokenizer::reset() {
  window_.clear();
  window_text_.clear();
  all_.clear();
}

}  // namespace specula::text
