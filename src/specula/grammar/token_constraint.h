#pragma once
// A constraint on generated text as decoding needs it: the grammar and the vocabulary's token
// bytes (built once per tokenizer and shared by every request).
#include <memory>

#include "specula/grammar/grammar.h"
#include "specula/grammar/token_trie.h"

namespace specula::grammar {

struct TokenConstraint {
  std::shared_ptr<const Grammar> grammar;  // null: unconstrained
  std::shared_ptr<const TokenTrie> vocabulary;
  explicit operator bool() const { return grammar != nullptr; }
};

}  // namespace specula::grammar
