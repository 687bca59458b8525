#include "specula/engine/text_stream.h"

#include <utility>

namespace specula {

GenerationTextStream::GenerationTextStream(const text::Tokenizer* tokenizer, bool skip_special_tokens,
                                           std::vector<std::string> stops)
    : matcher_(std::move(stops)) {
  if (tokenizer != nullptr) {
    text::DetokenizerOptions o;
    o.skip_special_tokens = skip_special_tokens;
    detokenizer_ = std::make_unique<text::StreamingDetokenizer>(*tokenizer, o);
  }
}

std::string GenerationTextStream::push(int32_t id) {
  if (detokenizer_ == nullptr || matcher_.stopped()) return {};
  return matcher_.push(detokenizer_->push(id)).text;
}

std::string GenerationTextStream::finish() {
  if (detokenizer_ == nullptr || matcher_.stopped()) return {};
  // The detokenizer's held bytes may still complete a stop string.
  std::string out = matcher_.push(detokenizer_->finish()).text;
  if (!matcher_.stopped()) out += matcher_.finish();
  return out;
}

}  // namespace specula
