#pragma once
// Pre-tokenizers of tokenizer.json: split normalized text into the "words" the model encodes
// independently.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/text/tokenizer_component.h"

namespace specula::text {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces each piece by the pieces it splits into (empty pieces are dropped).
  virtual void split(std::vector<std::string>& pieces) const = 0;
};

// How a Split keeps the delimiter (the Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Splits one string around the literal `pattern` (invert: the matches are the pieces).
void split_on_literal(const std::string& text, const std::string& pattern, SplitBehavior behavior, bool invert,
                      std::vector<std::string>& out);

// Builds the pre-tokenizer described by `j` (null -> nullptr). Supported: Split (String pattern),
// Sequence. Anything else throws naming the type and its JSON path.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const JsonPath& at);

}  // namespace specula::text
