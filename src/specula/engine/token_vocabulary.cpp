#include "specula/engine/token_vocabulary.h"

#include <algorithm>
#include <string>
#include <vector>

namespace specula {

std::shared_ptr<const grammar::TokenTrie> build_token_vocabulary(const text::Tokenizer& tokenizer,
                                                                 int64_t model_vocab) {
  const size_t n = std::min(tokenizer.vocab_size(), static_cast<size_t>(std::max<int64_t>(model_vocab, 0)));
  std::vector<std::string> bytes(n);
  for (size_t id = 0; id < n; ++id) bytes[id] = tokenizer.token_bytes(static_cast<int32_t>(id));
  // Trailing tokens without text (special placeholders past the model's embedding) are dropped.
  while (!bytes.empty() && bytes.back().empty()) bytes.pop_back();
  return std::make_shared<const grammar::TokenTrie>(std::move(bytes));
}

}  // namespace specula
