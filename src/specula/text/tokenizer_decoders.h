#pragma once
// Decoders of tokenizer.json: turn the token strings of an id sequence back into text.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/text/tokenizer_component.h"

namespace specula::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Transforms the token strings in place (the Hugging Face decode_chain); the decoded text is
  // their concatenation.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Builds the decoder described by `j` (null -> nullptr: tokens are concatenated as they are).
// Supported: Replace (String pattern), ByteFallback, Fuse, Strip, Sequence. Anything else throws
// naming the type and its JSON path.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const JsonPath& at);

// "<0xNN>" -> the byte value, or -1 when `token` is not a byte-fallback token.
int byte_fallback_value(std::string_view token);

}  // namespace specula::text
