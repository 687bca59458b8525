#include "specula/grammar/grammar_matcher.h"

#include <algorithm>

#include "specula/util/error.h"

namespace specula::grammar {
namespace {

// An ambiguous grammar can multiply the live stacks; past this the grammar is refused.
constexpr size_t kMaxStacks = 4096;

// The code points a UTF-8 sequence of `length` bytes can encode (no overlongs, no surrogate-only check).
constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};

int continuation_bytes(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 1;
  if (lead >= 0xE0 && lead <= 0xEF) return 2;
  if (lead >= 0xF0 && lead <= 0xF4) return 3;
  return -1;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  std::vector<Stack> stacks;
  for (uint32_t alt : grammar_->alternatives[grammar_->root]) {
    Stack s;
    if (grammar_->elements[alt].kind != ElementKind::End) s.push_back(alt);
    expand(std::move(s), stacks);
  }
  canonicalize(stacks);
  stacks_ = std::move(stacks);
}

void GrammarMatcher::expand(Stack stack, std::vector<Stack>& out) const {
  if (out.size() > kMaxStacks)
    fail("grammar: more than {} simultaneous parses (the grammar is too ambiguous)", kMaxStacks);
  if (stack.empty() || grammar_->elements[stack.back()].kind != ElementKind::Rule) {
    out.push_back(std::move(stack));
    return;
  }
  const uint32_t pos = stack.back();
  const uint32_t rule = grammar_->elements[pos].value;
  stack.pop_back();
  // Push the continuation only when something follows in this alternative (keeps right
  // recursion at constant depth).
  if (grammar_->elements[pos + 1].kind != ElementKind::End) stack.push_back(pos + 1);
  const auto& alts = grammar_->alternatives[rule];
  for (size_t i = 0; i < alts.size(); ++i) {
    Stack next = i + 1 < alts.size() ? stack : std::move(stack);
    if (grammar_->elements[alts[i]].kind != ElementKind::End) next.push_back(alts[i]);
    expand(std::move(next), out);
  }
}

void GrammarMatcher::canonicalize(std::vector<Stack>& stacks) const {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

bool GrammarMatcher::top_is(const Stack& s, ElementKind kind) const {
  return !s.empty() && grammar_->elements[s.back()].kind == kind;
}

// Moves every stack whose top `matches` past that top; false (and nothing changed) when none does.
template <typename Matches>
bool GrammarMatcher::advance_stacks(Matches&& matches) {
  std::vector<Stack> next;
  for (const Stack& s : stacks_) {
    if (s.empty() || !matches(grammar_->elements[s.back()])) continue;
    const uint32_t pos = s.back();
    Stack t(s.begin(), s.end() - 1);
    if (grammar_->elements[pos + 1].kind != ElementKind::End) t.push_back(pos + 1);
    expand(std::move(t), next);
  }
  if (next.empty()) return false;
  canonicalize(next);
  stacks_ = std::move(next);
  return true;
}

bool GrammarMatcher::accept_code_point(uint32_t cp) {
  return advance_stacks(
      [&](const Element& e) { return e.kind == ElementKind::Chars && grammar_->set_contains(e.value, cp); });
}

bool GrammarMatcher::accept_token_id(int32_t token) {
  if (partial_remaining_ != 0 || token < 0) return false;
  return advance_stacks(
      [&](const Element& e) { return e.kind == ElementKind::Token && e.value == static_cast<uint32_t>(token); });
}

std::vector<int32_t> GrammarMatcher::next_token_terminals() const {
  std::vector<int32_t> ids;
  if (partial_remaining_ != 0) return ids;
  for (const Stack& s : stacks_)
    if (top_is(s, ElementKind::Token)) ids.push_back(static_cast<int32_t>(grammar_->elements[s.back()].value));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

bool GrammarMatcher::keep_stacks_accepting(uint32_t first, uint32_t last) {
  std::vector<Stack> kept;
  for (const Stack& s : stacks_)
    if (top_is(s, ElementKind::Chars) && grammar_->set_intersects(grammar_->elements[s.back()].value, first, last))
      kept.push_back(s);
  if (kept.empty()) return false;
  stacks_ = std::move(kept);
  return true;
}

bool GrammarMatcher::accept_byte(uint8_t byte) {
  if (partial_remaining_ == 0) {
    if (byte < 0x80) return accept_code_point(byte);
    const int n = continuation_bytes(byte);
    if (n < 0) return false;
    const uint32_t value = byte & (0x3Fu >> n);
    const uint32_t first = std::max(value << (6 * n), kMinForLength[n + 1]);
    const uint32_t last = std::min((value << (6 * n)) | ((1u << (6 * n)) - 1), kMaxCodePoint);
    if (first > last) return false;
    if (!keep_stacks_accepting(first, last)) return false;
    partial_value_ = value;
    partial_remaining_ = static_cast<uint8_t>(n);
    partial_length_ = static_cast<uint8_t>(n + 1);
    return true;
  }
  if ((byte & 0xC0) != 0x80) return false;
  const uint32_t value = (partial_value_ << 6) | (byte & 0x3Fu);
  const int remaining = partial_remaining_ - 1;
  if (remaining == 0) {
    if (value < kMinForLength[partial_length_] || value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF))
      return false;
    if (!accept_code_point(value)) return false;
    partial_value_ = 0;
    partial_remaining_ = 0;
    partial_length_ = 0;
    return true;
  }
  const uint32_t first = std::max(value << (6 * remaining), kMinForLength[partial_length_]);
  const uint32_t last = std::min((value << (6 * remaining)) | ((1u << (6 * remaining)) - 1), kMaxCodePoint);
  if (first > last || (first >= 0xD800 && last <= 0xDFFF)) return false;  // overlong or surrogate only
  if (!keep_stacks_accepting(first, last)) return false;
  partial_value_ = value;
  partial_remaining_ = static_cast<uint8_t>(remaining);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  GrammarMatcher copy = *this;
  for (const char c : bytes)
    if (!copy.accept_byte(static_cast<uint8_t>(c))) return false;
  *this = std::move(copy);
  return true;
}

bool GrammarMatcher::can_end() const {
  return partial_remaining_ == 0 && !stacks_.empty() && stacks_.front().empty();  // sorted: empty first
}

std::vector<uint32_t> GrammarMatcher::key() const {
  // A partial character whose every completion is a valid code point that every stack's top
  // accepts has the same future whatever its bytes so far (each continuation byte is accepted,
  // and every stack advances at the end): its value is left out of the key, so the token mask's
  // automaton has one state for it instead of one per prefix of every multi-byte character.
  auto partial_value_matters = [&] {
    if (partial_remaining_ == 0) return false;
    const uint32_t shift = 6u * partial_remaining_;
    const uint32_t first = partial_value_ << shift;
    const uint32_t last = first | ((1u << shift) - 1);
    if (first < kMinForLength[partial_length_] || last > kMaxCodePoint || (first <= 0xDFFF && last >= 0xD800))
      return true;
    auto covers = [&](const Stack& s) {
      if (!top_is(s, ElementKind::Chars)) return false;
      const auto& ranges = grammar_->char_sets[grammar_->elements[s.back()].value];
      auto it = std::upper_bound(ranges.begin(), ranges.end(), first,
                                 [](uint32_t v, const CodePointRange& r) { return v < r.first; });
      return it != ranges.begin() && std::prev(it)->last >= last;
    };
    return !std::all_of(stacks_.begin(), stacks_.end(), covers);
  };
  constexpr uint32_t kAnyPartialValue = 0xFFFFFFFF;  // above every code point
  std::vector<uint32_t> k;
  k.push_back(partial_value_matters() ? partial_value_ : kAnyPartialValue);
  k.push_back(static_cast<uint32_t>(partial_remaining_) << 8 | partial_length_);
  for (const Stack& s : stacks_) {
    k.push_back(static_cast<uint32_t>(s.size()));
    k.insert(k.end(), s.begin(), s.end());
  }
  return k;
}

}  // namespace specula::grammar
