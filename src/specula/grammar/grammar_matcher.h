#pragma once
// Where a grammar (grammar.h) stands after some bytes of output: the set of pushdown stacks that
// are still alive, plus a partly read UTF-8 character. Advanced byte by byte, so tokens that end
// inside a character (byte-fallback tokens, split multi-byte characters) are matched exactly: a
// partial character survives only while some stack accepts a code point it can still become.
//
// A stack lists element positions (the next element of each open alternative, innermost last) and
// is always expanded until its top is a character set or a token terminal; an empty stack means
// the grammar can end. Token terminals are passed by id (accept_token_id), never by bytes.
// Copying a matcher is the way to explore (speculative drafts, the token mask) and roll back.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "specula/grammar/grammar.h"

namespace specula::grammar {

class GrammarMatcher {
 public:
  // At the start of the grammar's root rule.
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Advances by one byte; false (and the state unchanged) when the grammar cannot continue with it.
  bool accept_byte(uint8_t byte);
  // Advances by every byte; false (and the state unchanged) when one is rejected.
  bool accept_bytes(std::string_view bytes);
  // Advances past the token terminal `token`; false (and the state unchanged) when none may come here.
  bool accept_token_id(int32_t token);
  // The token terminals that may come next, sorted and unique (none inside a partial character).
  std::vector<int32_t> next_token_terminals() const;

  // The output so far is a complete sentence of the grammar.
  bool can_end() const;
  // Complete, and nothing may follow.
  bool finished() const { return can_end() && stacks_.size() == 1; }
  // No continuation at all (only after construction from a grammar that matches nothing).
  bool dead() const { return stacks_.empty(); }

  // A canonical description of the state (equal keys = equal futures), for caching.
  std::vector<uint32_t> key() const;
  const Grammar& grammar() const { return *grammar_; }

 private:
  using Stack = std::vector<uint32_t>;
  // Expands `stack` until every resulting stack's top is a character set (or it is empty).
  void expand(Stack stack, std::vector<Stack>& out) const;
  bool accept_code_point(uint32_t cp);
  bool top_is(const Stack& s, ElementKind kind) const;
  template <typename Matches>
  bool advance_stacks(Matches&& matches);
  // Keeps the stacks whose top may match some code point in [first, last].
  bool keep_stacks_accepting(uint32_t first, uint32_t last);
  void canonicalize(std::vector<Stack>& stacks) const;

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;      // sorted, unique
  uint32_t partial_value_ = 0;     // bits of the character read so far
  uint8_t partial_remaining_ = 0;  // continuation bytes still expected
  uint8_t partial_length_ = 0;     // the character's total length in bytes
};

}  // namespace specula::grammar
