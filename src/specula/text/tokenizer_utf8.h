#pragma once
// Small UTF-8 helpers shared by the tokenizer components, the detokenizer and the stop-string
// matcher. They never throw: malformed input is measured byte by byte so callers can decide.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace specula::text {

// Length of the UTF-8 sequence that starts with `lead` (1 for stray continuation/invalid bytes, so
// scanning always advances).
inline size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

// Decodes the character at s[pos]; returns U+FFFD for malformed sequences (truncated, bad
// continuation, overlong, surrogate, above U+10FFFF). `len` gets the bytes used (at least 1).
inline char32_t utf8_decode(std::string_view s, size_t pos, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  const size_t n = utf8_sequence_length(b0);
  *len = 1;
  if (n == 1) return b0 < 0x80 ? char32_t(b0) : char32_t(0xFFFD);
  char32_t cp = n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < n; ++i) {
    if (pos + i >= s.size()) {  // truncated at the end of the input
      *len = i;
      return 0xFFFD;
    }
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) {
      *len = i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = n;
  const char32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xFFFD;
  return cp;
}

inline void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the longest prefix of `bytes` that is valid UTF-8 (strict: no overlongs, surrogates or
// code points above U+10FFFF).
size_t utf8_valid_prefix(std::string_view bytes);

// Unicode White_Space (what Rust's char::is_whitespace and regex \s accept).
bool unicode_is_whitespace(char32_t cp);

// Approximation of regex \w for added-token `single_word` checks: ASCII letters, digits and '_'
// exactly; other code points count as word characters unless they are whitespace, ASCII
// punctuation or in the general/CJK punctuation blocks. Gemma's files do not use single_word.
bool unicode_is_word_char(char32_t cp);

}  // namespace specula::text
