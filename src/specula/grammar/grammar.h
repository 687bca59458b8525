#pragma once
// A context-free grammar over Unicode code points, in the flat form the matcher walks
// (grammar_matcher.h). Rules are alternatives of sequences; a sequence's elements are character
// sets (sorted, disjoint code point ranges), references to rules, or token terminals: one token id
// of the vocabulary, matched by id and never by text (a tokenizer's special tokens, e.g. Gemma's
// <|tool_call>, have no text an ordinary token could spell). Repetitions and groups of the text
// format (gbnf_parser.h) are already rewritten into helper rules here.
//
// Build() checks what would make matching loop or fail silently: undefined or unreachable-root
// references and left recursion (a rule reaching itself before consuming a character, also through
// rules that can match nothing). Such grammars throw specula::Error naming the rule.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace specula::grammar {

struct CodePointRange {
  uint32_t first = 0;
  uint32_t last = 0;  // inclusive
};

enum class ElementKind : uint8_t { End, Chars, Rule, Token };

struct Element {
  ElementKind kind = ElementKind::End;
  uint32_t value = 0;  // Chars: index into char_sets; Rule: rule index; Token: token id
};

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct Grammar {
  // Every alternative of every rule, each followed by an End element.
  std::vector<Element> elements;
  // rule -> the element index where each of its alternatives starts.
  std::vector<std::vector<uint32_t>> alternatives;
  std::vector<std::string> rule_names;
  std::vector<std::vector<CodePointRange>> char_sets;
  uint32_t root = 0;

  bool set_contains(uint32_t set, uint32_t code_point) const;
  // Whether the set holds any code point in [first, last].
  bool set_intersects(uint32_t set, uint32_t first, uint32_t last) const;
  // The ids of every token terminal, sorted and unique.
  std::vector<int32_t> token_terminals() const;
};

// One item of a sequence while a grammar is being built.
struct Item {
  ElementKind kind = ElementKind::Chars;  // Chars, Rule or Token
  uint32_t value = 0;
};

// Builds a Grammar rule by rule; rules may be referenced before they are defined.
class GrammarBuilder {
 public:
  // The index of the rule named `name`, created (undefined) if new.
  uint32_t rule(const std::string& name);
  // A fresh helper rule named after `base` (e.g. "value-3").
  uint32_t helper_rule(const std::string& base);
  bool defined(uint32_t rule) const { return defined_[rule]; }
  // Adds one alternative to `rule`.
  void add_alternative(uint32_t rule, std::vector<Item> sequence);
  void mark_defined(uint32_t rule) { defined_[rule] = true; }
  // A character set from ranges (normalized: sorted, merged); `negate` takes the complement.
  uint32_t char_set(std::vector<CodePointRange> ranges, bool negate);
  // A set with one code point (reused when it already exists).
  uint32_t single_char(uint32_t code_point);
  const std::string& name(uint32_t rule) const { return names_[rule]; }
  size_t rule_count() const { return names_.size(); }

  // Checks and flattens; `root` names the start rule. Throws specula::Error.
  Grammar build(const std::string& root) const;

 private:
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::vector<std::vector<std::vector<Item>>> rules_;
  std::vector<std::vector<CodePointRange>> sets_;
  std::map<std::string, uint32_t> index_;
  std::map<uint32_t, uint32_t> single_sets_;  // code point -> its one-character set
};

}  // namespace specula::grammar
