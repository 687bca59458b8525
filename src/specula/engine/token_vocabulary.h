#pragma once
// The vocabulary as constrained decoding sees it (grammar/token_trie.h): each token's raw bytes
// from the tokenizer, special tokens without bytes. Ids below model_vocab only (pass INT64_MAX when
// the model is not loaded yet); trailing tokens without bytes are left out.
#include <cstdint>
#include <memory>

#include "specula/grammar/token_trie.h"
#include "specula/text/tokenizer.h"

namespace specula {

std::shared_ptr<const grammar::TokenTrie> build_token_vocabulary(const text::Tokenizer& tokenizer, int64_t model_vocab);

}  // namespace specula
