#pragma once
// Post-processors of tokenizer.json: add the special tokens around an encoded sequence when
// encoding with add_special_tokens (Gemma: prepend <bos>).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/text/tokenizer_component.h"

namespace specula::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Wraps a single encoded sequence.
  virtual std::vector<int32_t> process(const std::vector<int32_t>& ids) const = 0;
};

// Builds the post-processor described by `j` (null -> nullptr). Supported: TemplateProcessing
// (single sequences). `token_id` resolves a token string to its id (or -1) to check the template's
// special tokens against the vocabulary.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j, const JsonPath& at,
                                                   const std::function<int32_t(const std::string&)>& token_id);

}  // namespace specula::text
