#include "specula/text/tokenizer_utf8.h"

namespace specula::text {

namespace {

// Validates one sequence at bytes[pos]; returns its length, 0 if invalid, or SIZE_MAX if the input
// ends before the sequence does (and everything up to the end is a valid beginning).
constexpr size_t kTruncated = static_cast<size_t>(-1);

size_t validate_sequence(std::string_view bytes, size_t pos) {
  const auto b0 = static_cast<unsigned char>(bytes[pos]);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t i = 1; i < n; ++i) {
    if (pos + i >= bytes.size()) return kTruncated;
    const auto b = static_cast<unsigned char>(bytes[pos + i]);
    const unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return 0;
  }
  return n;
}

}  // namespace

size_t utf8_valid_prefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t n = validate_sequence(bytes, pos);
    if (n == 0 || n == kTruncated) break;
    pos += n;
  }
  return pos;
}

bool unicode_is_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool unicode_is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  }
  if (unicode_is_whitespace(cp)) return false;
  if (cp >= 0x80 && cp <= 0xBF) return false;        // Latin-1 controls, punctuation and symbols
  if (cp >= 0x2000 && cp <= 0x2BFF) return false;    // punctuation, arrows, math, shapes
  if (cp >= 0x3000 && cp <= 0x303F) return false;    // CJK punctuation
  if (cp >= 0xFE30 && cp <= 0xFE4F) return false;    // CJK compatibility forms
  if (cp >= 0xFF00 && cp <= 0xFF0F) return false;    // fullwidth punctuation
  if (cp >= 0x1F000 && cp <= 0x1FAFF) return false;  // emoji and pictographs
  return true;
}

}  // namespace specula::text
