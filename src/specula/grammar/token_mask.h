#pragma once
// The per-step token mask of constrained decoding: which tokens of the vocabulary may follow a
// grammar state. It walks the vocabulary trie (token_trie.h) with the state, pruning a subtree as
// soon as its prefix is rejected. Grammar states met on the way are interned into a lazily built
// automaton (state x byte -> state), so a walk is mostly table lookups, and recent masks are kept
// per state: repeated states (e.g. inside a JSON string) cost a copy.
//
// Token terminals (grammar.h) are allowed by id on top of the walk: they must name tokens without
// bytes (special tokens), which the trie does not hold, so no ordinary token can stand for them.
//
// A masker belongs to one generation (its caches are not shared between threads); the grammar and
// the trie may be shared.
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "specula/grammar/grammar_matcher.h"
#include "specula/grammar/token_trie.h"

namespace specula::grammar {

// Throws specula::Error when a token terminal of `grammar` is outside [0, vocab_size), has bytes in
// `trie` (an ordinary token: the grammar should spell its text) or is one of `end_tokens`.
void check_token_terminals(const Grammar& grammar, const TokenTrie& trie, size_t vocab_size,
                           const std::vector<int32_t>& end_tokens);

class TokenMasker {
 public:
  // vocab_size: the model's (>= the trie's; ids past the trie are allowed only as token terminals).
  // end_tokens: the tokens that end generation (EOS), allowed exactly when the grammar can end.
  // Throws specula::Error for a token terminal check_token_terminals refuses.
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie, size_t vocab_size,
              std::vector<int32_t> end_tokens);

  // Bit t of the result (word t / 64, bit t % 64) is set when token t may follow `state`. The span
  // stays valid until the next call.
  std::span<const uint64_t> mask(const GrammarMatcher& state);
  // The same mask computed afresh into `bits` (the per-state mask cache neither read nor filled).
  void compute_mask(const GrammarMatcher& state, std::vector<uint64_t>& bits);

  // Whether `token` may follow `state` (no mask needed); advances `state` past it when it may.
  bool accept_token(GrammarMatcher& state, int32_t token) const;
  bool is_end_token(int32_t token) const;
  size_t vocab_size() const { return vocab_size_; }
  // Grammar states interned so far (for benchmarks: what a walk had to explore).
  size_t automaton_states() const { return states_.size(); }

 private:
  int32_t intern(const GrammarMatcher& state);
  int32_t transition(int32_t state, uint8_t byte);
  void walk(int32_t root, std::vector<uint64_t>& bits);
  void fill_mask(int32_t root, const GrammarMatcher& state, std::vector<uint64_t>& bits);
  void reset_automaton();

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  size_t vocab_size_ = 0;
  std::vector<int32_t> end_tokens_;

  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& k) const;
  };
  std::vector<GrammarMatcher> states_;  // id -> state; id 0 is the dead state
  std::unordered_map<std::vector<uint32_t>, int32_t, KeyHash> ids_;
  std::vector<int32_t> transitions_;                          // id * 256 + byte -> id; -1 not computed yet
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;  // recent masks by root state id
  std::vector<int32_t> depth_state_;
  std::vector<uint64_t> result_;
};

}  // namespace specula::grammar
