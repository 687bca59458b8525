#pragma once
// Splits template source into text and tag tokens the way Jinja2's lexer does, including its
// whitespace rules: `{%-`/`-%}` strip all whitespace on that side, trim_blocks drops the first
// newline after a block or comment tag, lstrip_blocks drops the spaces and tabs before a block or
// comment tag that starts a line (`{%+` opts out), and one trailing newline of the source is
// dropped (keep_trailing_newline off). Raw blocks become text.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specula::jinja {

enum class TokenType {
  Text,
  VariableBegin,
  VariableEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Integer,
  Float,
  Operator,
  End
};

struct Token {
  TokenType type;
  std::string value;  // text, name, decoded string literal, or operator spelling
  int line = 1;
  int64_t integer = 0;
  double real = 0.0;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws TemplateError (with the line) for an unterminated tag, comment, string or raw block and
// for characters that cannot start a token.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options);

}  // namespace specula::jinja
