#include "specula/text/jinja/lexer.h"

#include <algorithm>

#include <fmt/format.h>

#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/string_ops.h"

namespace specula::jinja {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal's body, which is what Jinja applies.
std::string decode_string_literal(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        char32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0) throw TemplateError(line, fmt::format("truncated \\{} escape in a string literal", e));
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10FFFF) throw TemplateError(line, "string literal escape is beyond U+10FFFF");
        append_utf8(out, cp);
        i += digits;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          char32_t cp = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<char32_t>(body[++i] - '0');
          append_utf8(out, cp);
        } else {
          out.push_back('\\');  // unknown escapes stay as written, as in Python
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : src_(std::move(source)), options_(options) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos_));
        pos_ = src_.size();
        break;
      }
      const char kind = src_[tag + 1];
      const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      std::string text = src_.substr(pos_, tag - pos_);
      const int text_newlines = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      strip_before_tag(text, sign, kind != '{');
      emit_text(std::move(text), text_newlines);
      pos_ = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        lex_comment();
      } else if (kind == '%' && lex_raw_if_present()) {
        continue;
      } else {
        lex_tag(kind == '%');
      }
    }
    tokens_.push_back(Token{TokenType::End, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void strip_before_tag(std::string& text, char sign, bool lstrip_applies) const {
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0 && is_ws(text[e - 1])) --e;
      text.resize(e);
    } else if (sign != '+' && options_.lstrip_blocks && lstrip_applies) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
          std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos), text.end(), is_ws)) {
        text.resize(l_pos);
      }
    }
  }

  void emit_text(std::string text, int newlines = -1) {
    if (newlines < 0) newlines = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
    if (!text.empty()) tokens_.push_back(Token{TokenType::Text, std::move(text), line_});
    line_ += newlines;
  }

  // After an end tag at src_[end_pos..): applies `-` (strip all whitespace) or trim_blocks.
  void finish_tag(size_t after, char modifier, bool block_like) {
    pos_ = after;
    line_starting_ = false;
    if (modifier == '-') {
      while (pos_ < src_.size() && is_ws(src_[pos_])) {
        line_starting_ = src_[pos_] == '\n';
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
    } else if (modifier != '+' && block_like && options_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      line_starting_ = true;
    }
  }

  void lex_comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) throw TemplateError(line_, "Missing end of comment tag");
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                         src_.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
    const char modifier = end > pos_ ? src_[end - 1] : '\0';
    finish_tag(end + 2, modifier == '-' || modifier == '+' ? modifier : '\0', true);
  }

  size_t skip_ws(size_t p) const {
    while (p < src_.size() && is_ws(src_[p])) ++p;
    return p;
  }

  // Matches `\s*WORD\s*[-+]?%}` at p; returns the end tag's modifier and the position after it.
  bool match_word_tag(size_t p, std::string_view word, char& modifier, size_t& after) const {
    p = skip_ws(p);
    if (src_.compare(p, word.size(), word) != 0) return false;
    p = skip_ws(p + word.size());
    modifier = '\0';
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) modifier = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    after = p + 2;
    return true;
  }

  bool lex_raw_if_present() {
    char modifier;
    size_t after;
    if (!match_word_tag(pos_, "raw", modifier, after) || modifier == '+') return false;
    const int start_line = line_;
    finish_tag(after, modifier, false);  // `{% raw %}` itself never trims the following newline
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      const char sign = p + 2 < src_.size() ? src_[p + 2] : '\0';
      const size_t name_at = p + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      char end_modifier;
      size_t end_after;
      if (!match_word_tag(name_at, "endraw", end_modifier, end_after)) continue;
      std::string body = src_.substr(pos_, p - pos_);
      const int newlines = static_cast<int>(std::count(body.begin(), body.end(), '\n'));
      strip_before_tag(body, sign, true);
      emit_text(std::move(body), newlines);
      line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(p),
                                           src_.begin() + static_cast<std::ptrdiff_t>(end_after), '\n'));
      finish_tag(end_after, end_modifier, true);
      return true;
    }
    throw TemplateError(start_line, "Missing end of raw directive");
  }

  void lex_tag(bool block) {
    tokens_.push_back(Token{block ? TokenType::BlockBegin : TokenType::VariableBegin, "", line_});
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_ws(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size())
        throw TemplateError(
            line_, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (depth == 0 && end_tag_here(block)) return;
      const char c = src_[pos_];
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        tokens_.push_back(Token{TokenType::Name, src_.substr(pos_, e - pos_), line_});
        pos_ = e;
      } else if (is_digit(c)) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* const kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                                 "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
        std::string op;
        for (const char* candidate : kOperators) {
          if (src_.compare(pos_, std::char_traits<char>::length(candidate), candidate) == 0) {
            op = candidate;
            break;
          }
        }
        if (op.empty()) throw TemplateError(line_, fmt::format("unexpected char '{}'", c));
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        tokens_.push_back(Token{TokenType::Operator, op, line_});
        pos_ += op.size();
      }
    }
  }

  bool end_tag_here(bool block) {
    const std::string_view close = block ? "%}" : "}}";
    char modifier = '\0';
    size_t p = pos_;
    if ((src_[p] == '-' || (block && src_[p] == '+')) && src_.compare(p + 1, 2, close) == 0) modifier = src_[p++];
    if (src_.compare(p, 2, close) != 0) return false;
    tokens_.push_back(Token{block ? TokenType::BlockEnd : TokenType::VariableEnd, "", line_});
    finish_tag(p + 2, modifier, block);
    return true;
  }

  void lex_number() {
    size_t e = pos_;
    auto digits = [&](size_t& p) {
      const size_t s = p;
      while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1]))))
        ++p;
      return p > s;
    };
    digits(e);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      ++e;
      digits(e);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t p = e + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (digits(p)) {
        e = p;
        is_float = true;
      }
    }
    std::string spelled;
    for (size_t i = pos_; i < e; ++i)
      if (src_[i] != '_') spelled.push_back(src_[i]);
    Token token{is_float ? TokenType::Float : TokenType::Integer, spelled, line_};
    try {
      if (is_float) {
        token.real = std::stod(spelled);
      } else {
        token.integer = std::stoll(spelled);
      }
    } catch (const std::exception&) {
      throw TemplateError(line_, fmt::format("number literal {} is out of range", spelled));
    }
    tokens_.push_back(std::move(token));
    pos_ = e;
  }

  void lex_string(char quote) {
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) throw TemplateError(line_, "unexpected end of string literal");
    const std::string_view body(src_.data() + pos_ + 1, p - pos_ - 1);
    tokens_.push_back(Token{TokenType::String, decode_string_literal(body, line_), line_});
    line_ += static_cast<int>(std::count(body.begin(), body.end(), '\n'));
    pos_ = p + 1;
  }

  std::string src_;
  LexerOptions options_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
};

// Jinja treats \r\n, \r and \n alike and drops one trailing newline.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(normalize_newlines(source), options).run();
}

}  // namespace specula::jinja
