#include "specula/grammar/gbnf_parser.h"

#include <optional>
#include <string>
#include <vector>

#include "specula/util/error.h"

namespace specula::grammar {
namespace {

constexpr size_t kMaxNesting = 200;
constexpr uint64_t kMaxTokenId = 0x7FFFFFFF;  // token ids are int32

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  Grammar parse() {
    skip_space();
    if (pos_ == s_.size()) error("the grammar is empty (it needs at least a 'root ::= ...' rule)");
    while (pos_ < s_.size()) parse_rule();
    return b_.build("root");
  }

 private:
  [[noreturn]] void error(const std::string& what) const { error_at(pos_, what); }
  [[noreturn]] void error_at(size_t at, const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    fail("grammar line {}, column {}: {}", line, column, what);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_space() {
    while (!at_end()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(s_[pos_])) ++pos_;
    if (pos_ == start) error(describe_unexpected("a rule name"));
    return std::string(s_.substr(start, pos_ - start));
  }

  std::string describe_unexpected(const std::string& wanted) const {
    if (at_end()) return "expected " + wanted + ", found the end of the grammar";
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7f) return fmt::format("expected {}, found '{}'", wanted, static_cast<char>(c));
    return fmt::format("expected {}, found byte 0x{:02x}", wanted, c);
  }

  // True when a `name ::=` starts at pos_ (the next rule begins).
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < s_.size() && is_name_char(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    skip_space();
    if (s_.substr(pos_, 3) != "::=") error(describe_unexpected("'::=' after the rule name '" + name + "'"));
    pos_ += 3;
    const uint32_t r = b_.rule(name);
    if (b_.defined(r)) error_at(start, "rule '" + name + "' is defined twice");
    b_.mark_defined(r);
    skip_space();
    parse_alternatives(r, 0);
  }

  void parse_alternatives(uint32_t rule, size_t depth) {
    if (depth > kMaxNesting) error(fmt::format("groups nested deeper than {}", kMaxNesting));
    b_.add_alternative(rule, parse_sequence(depth));
    while (peek() == '|') {
      ++pos_;
      skip_space();
      b_.add_alternative(rule, parse_sequence(depth));
    }
  }

  std::vector<Item> parse_sequence(size_t depth) {
    std::vector<Item> seq;
    while (!at_end() && peek() != '|' && peek() != ')' && !at_rule_start()) {
      const size_t item_start = pos_;
      std::vector<Item> primary = parse_primary(depth);
      skip_space();
      apply_postfix(primary, item_start, seq);
      skip_space();
    }
    return seq;
  }

  std::vector<Item> parse_primary(size_t depth) {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return {Item{ElementKind::Chars, parse_class()}};
    if (c == '<') return {Item{ElementKind::Token, parse_token_id()}};
    if (c == '.') {
      ++pos_;
      return {Item{ElementKind::Chars, b_.char_set({{0, kMaxCodePoint}}, false)}};
    }
    if (c == '(') {
      ++pos_;
      skip_space();
      const uint32_t group = b_.helper_rule("group");
      parse_alternatives(group, depth + 1);
      if (peek() != ')') error(describe_unexpected("')' to close the group"));
      ++pos_;
      return {Item{ElementKind::Rule, group}};
    }
    if (is_name_char(c)) return {Item{ElementKind::Rule, b_.rule(parse_name())}};
    error(describe_unexpected("a literal, a character class, '.', '(', a token <[id]> or a rule name"));
  }

  // Rewrites the repetition operators into helper rules; appends the result to `seq`.
  void apply_postfix(std::vector<Item> primary, size_t item_start, std::vector<Item>& seq) {
    const char c = peek();
    if (c != '*' && c != '+' && c != '?' && c != '{') {
      seq.insert(seq.end(), primary.begin(), primary.end());
      return;
    }
    uint32_t min = 0, max = 0;
    bool unbounded = false;
    if (c == '*') {
      unbounded = true;
      ++pos_;
    } else if (c == '+') {
      min = 1;
      unbounded = true;
      ++pos_;
    } else if (c == '?') {
      max = 1;
      ++pos_;
    } else {
      ++pos_;
      skip_space();
      min = parse_count();
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
        if (peek() == '}')
          unbounded = true;
        else
          max = parse_count();
      } else {
        max = min;
      }
      skip_space();
      if (peek() != '}') error(describe_unexpected("'}' to close the repetition"));
      ++pos_;
      if (!unbounded && max < min)
        error_at(item_start, fmt::format("repetition {{{},{}}} has max below min", min, max));
    }
    const Item x = as_single_item(std::move(primary));
    for (uint32_t i = 0; i < min; ++i) seq.push_back(x);
    if (unbounded) {
      const uint32_t star = b_.helper_rule("star");  // star ::= x star | ""
      b_.add_alternative(star, {x, Item{ElementKind::Rule, star}});
      b_.add_alternative(star, {});
      seq.push_back(Item{ElementKind::Rule, star});
      return;
    }
    // (x (x (x)?)?)? for max - min optional copies, innermost first.
    std::optional<Item> tail;
    for (uint32_t i = min; i < max; ++i) {
      const uint32_t opt = b_.helper_rule("opt");
      std::vector<Item> body{x};
      if (tail) body.push_back(*tail);
      b_.add_alternative(opt, std::move(body));
      b_.add_alternative(opt, {});
      tail = Item{ElementKind::Rule, opt};
    }
    if (tail) seq.push_back(*tail);
  }

  Item as_single_item(std::vector<Item> items) {
    if (items.size() == 1) return items[0];
    const uint32_t group = b_.helper_rule("group");
    b_.add_alternative(group, std::move(items));
    return Item{ElementKind::Rule, group};
  }

  // <[id]>: a token terminal.
  uint32_t parse_token_id() {
    const size_t start = pos_;
    if (s_.substr(pos_, 2) != "<[") error("expected a token as <[id]>");
    pos_ += 2;
    uint64_t id = 0;
    const size_t digits = pos_;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      id = id * 10 + static_cast<uint64_t>(s_[pos_] - '0');
      if (id > kMaxTokenId) error_at(start, fmt::format("token id exceeds the limit {}", kMaxTokenId));
      ++pos_;
    }
    if (pos_ == digits) error(describe_unexpected("a token id"));
    if (s_.substr(pos_, 2) != "]>") error(describe_unexpected("']>' to close the token"));
    pos_ += 2;
    return static_cast<uint32_t>(id);
  }

  uint32_t parse_count() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(s_[pos_] - '0');
      if (v > kMaxRepetition) error_at(start, fmt::format("repetition count exceeds the limit {}", kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) error(describe_unexpected("a repetition count"));
    return static_cast<uint32_t>(v);
  }

  std::vector<Item> parse_literal() {
    ++pos_;  // opening quote
    std::vector<Item> items;
    while (true) {
      if (at_end()) error("unterminated string literal (missing '\"')");
      if (peek() == '"') {
        ++pos_;
        return items;
      }
      if (peek() == '\n') error("newline inside a string literal (write \\n)");
      items.push_back(Item{ElementKind::Chars, b_.single_char(parse_char(false))});
    }
  }

  uint32_t parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CodePointRange> ranges;
    while (true) {
      if (at_end()) error("unterminated character class (missing ']')");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      const uint32_t first = parse_char(true);
      uint32_t last = first;
      if (peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        ++pos_;
        const size_t at = pos_;
        last = parse_char(true);
        if (last < first) error_at(at, fmt::format("class range U+{:04X}-U+{:04X} is reversed", first, last));
      }
      ranges.push_back({first, last});
    }
    return b_.char_set(std::move(ranges), negate);
  }

  // One character of a literal or class: an escape or a UTF-8 encoded code point.
  uint32_t parse_char(bool in_class) {
    const size_t start = pos_;
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (at_end()) error("unfinished escape at the end of the grammar");
      const char e = s_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': return '\\';
        case '"': return '"';
        case '\'': return '\'';
        case '/': return '/';
        case 'x': return parse_hex(2, start);
        case 'u': return parse_hex(4, start);
        case 'U': return parse_hex(8, start);
        default:
          if (in_class && (e == ']' || e == '[' || e == '-' || e == '^')) return static_cast<unsigned char>(e);
          error_at(start, fmt::format("unknown escape '\\{}'", e));
      }
    }
    if (c < 0x80) {
      ++pos_;
      return c;
    }
    const int n = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 && c < 0xF0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : -1;
    if (n < 0) error_at(start, fmt::format("invalid UTF-8 byte 0x{:02x}", c));
    uint32_t cp = c & (0x3F >> n);
    ++pos_;
    for (int i = 0; i < n; ++i) {
      if (at_end() || (static_cast<unsigned char>(s_[pos_]) & 0xC0) != 0x80) error_at(start, "invalid UTF-8 sequence");
      cp = (cp << 6) | (static_cast<unsigned char>(s_[pos_++]) & 0x3F);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[n] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
      error_at(start, "invalid UTF-8 sequence");
    return cp;
  }

  uint32_t parse_hex(int digits, size_t start) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) error_at(start, fmt::format("escape needs {} hex digits", digits));
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint) error_at(start, fmt::format("code point 0x{:X} is beyond U+10FFFF", v));
    return v;
  }

  std::string_view s_;
  size_t pos_ = 0;
  GrammarBuilder b_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace specula::grammar
