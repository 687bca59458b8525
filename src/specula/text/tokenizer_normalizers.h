#pragma once
// Normalizers of tokenizer.json: text transformations applied to every piece of input that is not
// an added token, before pre-tokenization.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "specula/text/tokenizer_component.h"

namespace specula::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Builds the normalizer described by `j` (null -> nullptr). Supported: Replace (String pattern),
// Prepend, Strip, Sequence. Anything else throws naming the type and its JSON path.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const JsonPath& at);

}  // namespace specula::text
