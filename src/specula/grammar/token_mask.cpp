#include "specula/grammar/token_mask.h"

#include <algorithm>

#include "specula/util/error.h"

namespace specula::grammar {
namespace {

constexpr int32_t kDead = 0;
constexpr int32_t kUnknown = -1;
// Past these the caches start over (memory stays bounded: 1 KiB of transitions per state).
constexpr size_t kMaxStates = 16384;
// One walk may not grow past this (64 MiB of transitions): a grammar needing more is refused.
constexpr size_t kHardMaxStates = 65536;
constexpr size_t kMaxCachedMasks = 32;

}  // namespace

void check_token_terminals(const Grammar& grammar, const TokenTrie& trie, size_t vocab_size,
                           const std::vector<int32_t>& end_tokens) {
  for (const int32_t id : grammar.token_terminals()) {
    if (static_cast<size_t>(id) >= vocab_size)
      fail("grammar: token <[{}]> is outside the vocabulary of {} tokens", id, vocab_size);
    if (static_cast<size_t>(id) < trie.vocab_size() && !trie.bytes_of(id).empty())
      fail("grammar: token <[{}]> is an ordinary token (write its text \"{}\" instead)", id, trie.bytes_of(id));
    if (std::find(end_tokens.begin(), end_tokens.end(), id) != end_tokens.end())
      fail("grammar: token <[{}]> ends the generation and cannot be part of the output", id);
  }
}

size_t TokenMasker::KeyHash::operator()(const std::vector<uint32_t>& k) const {
  uint64_t h = 1469598103934665603ull;
  for (const uint32_t v : k) h = (h ^ v) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                         size_t vocab_size, std::vector<int32_t> end_tokens)
    : grammar_(std::move(grammar)),
      trie_(std::move(trie)),
      vocab_size_(vocab_size),
      end_tokens_(std::move(end_tokens)) {
  if (trie_->vocab_size() > vocab_size_)
    fail("token mask: the tokenizer has {} tokens, more than the model's vocabulary of {}", trie_->vocab_size(),
         vocab_size_);
  std::sort(end_tokens_.begin(), end_tokens_.end());
  for (const int32_t t : end_tokens_)
    if (t < 0 || static_cast<size_t>(t) >= vocab_size_)
      fail("token mask: end token {} is outside the vocabulary of {}", t, vocab_size_);
  check_token_terminals(*grammar_, *trie_, vocab_size_, end_tokens_);
  depth_state_.resize(trie_->max_depth() + 1);
  reset_automaton();
}

void TokenMasker::reset_automaton() {
  states_.clear();
  ids_.clear();
  transitions_.clear();
  masks_.clear();
  // The dead state: a matcher with no stacks never appears otherwise, so a placeholder will do.
  states_.push_back(GrammarMatcher(grammar_));
  transitions_.assign(256, kDead);
}

bool TokenMasker::is_end_token(int32_t token) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), token);
}

bool TokenMasker::accept_token(GrammarMatcher& state, int32_t token) const {
  if (is_end_token(token)) return state.can_end();
  if (token < 0 || static_cast<size_t>(token) >= vocab_size_) return false;
  const bool has_bytes = static_cast<size_t>(token) < trie_->vocab_size() && !trie_->bytes_of(token).empty();
  return has_bytes ? state.accept_bytes(trie_->bytes_of(token)) : state.accept_token_id(token);
}

int32_t TokenMasker::intern(const GrammarMatcher& state) {
  std::vector<uint32_t> key = state.key();
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  if (states_.size() >= kHardMaxStates)
    fail("grammar: the token mask needs more than {} automaton states (simplify the grammar)", kHardMaxStates);
  const auto id = static_cast<int32_t>(states_.size());
  states_.push_back(state);
  ids_.emplace(std::move(key), id);
  transitions_.resize(transitions_.size() + 256, kUnknown);
  return id;
}

int32_t TokenMasker::transition(int32_t state, uint8_t byte) {
  const size_t slot = static_cast<size_t>(state) * 256 + byte;
  if (transitions_[slot] != kUnknown) return transitions_[slot];
  GrammarMatcher next = states_[static_cast<size_t>(state)];
  const int32_t id = next.accept_byte(byte) ? intern(next) : kDead;
  transitions_[slot] = id;  // after intern: the table may have grown
  return id;
}

void TokenMasker::walk(int32_t root, std::vector<uint64_t>& bits) {
  const TokenTrie& t = *trie_;
  depth_state_[0] = root;
  const size_t n = t.node_count();
  for (size_t i = 0; i < n;) {
    const uint16_t d = t.depth(i);
    const int32_t s = transition(depth_state_[d - 1], t.byte(i));
    if (s == kDead) {
      i = t.subtree_end(i);
      continue;
    }
    depth_state_[d] = s;
    for (const int32_t* tok = t.tokens_begin(i); tok != t.tokens_end(i); ++tok)
      bits[static_cast<size_t>(*tok) >> 6] |= uint64_t{1} << (*tok & 63);
    ++i;
  }
}

void TokenMasker::fill_mask(int32_t root, const GrammarMatcher& state, std::vector<uint64_t>& bits) {
  bits.assign((vocab_size_ + 63) / 64, 0);
  walk(root, bits);
  for (const int32_t tok : state.next_token_terminals())
    bits[static_cast<size_t>(tok) >> 6] |= uint64_t{1} << (tok & 63);
  if (state.can_end())
    for (const int32_t tok : end_tokens_) bits[static_cast<size_t>(tok) >> 6] |= uint64_t{1} << (tok & 63);
}

void TokenMasker::compute_mask(const GrammarMatcher& state, std::vector<uint64_t>& bits) {
  if (states_.size() > kMaxStates) reset_automaton();
  fill_mask(intern(state), state, bits);
}

std::span<const uint64_t> TokenMasker::mask(const GrammarMatcher& state) {
  if (states_.size() > kMaxStates) reset_automaton();
  const int32_t root = intern(state);
  if (auto it = masks_.find(root); it != masks_.end()) return it->second;
  fill_mask(root, state, result_);
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  return masks_.emplace(root, result_).first->second;
}

}  // namespace specula::grammar
