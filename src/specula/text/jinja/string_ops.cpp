#include "specula/text/jinja/string_ops.h"

#include <algorithm>

#include "specula/text/jinja/errors.h"
#include "specula/text/tokenizer_utf8.h"

namespace specula::jinja {

std::u32string utf8_to_u32(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int extra = 0;
    char32_t cp = byte;
    if (byte >= 0xF0 && byte < 0xF8) {
      extra = 3;
      cp = byte & 0x07;
    } else if (byte >= 0xE0) {
      extra = byte < 0xF0 ? 2 : 0;
      cp = byte & 0x0F;
    } else if (byte >= 0xC0) {
      extra = 1;
      cp = byte & 0x1F;
    }
    if (extra == 0 && byte >= 0x80) {
      cp = byte;  // invalid lead byte: keep it as one unit rather than failing
    }
    if (extra > 0 && i + extra >= text.size()) {  // truncated sequence: keep the byte
      out.push_back(byte);
      ++i;
      continue;
    }
    for (int k = 1; k <= extra; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out.push_back(cp);
    i += 1 + extra;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) { text::utf8_append(out, cp); }

std::string u32_to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(out, cp);
  return out;
}

size_t code_point_count(std::string_view text) {
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f);
}

std::string py_strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right) {
  if (chars && !chars->empty() && chars->size() != code_point_count(*chars)) {
    // Non-ASCII strip set: work on code points.
    const std::u32string set = utf8_to_u32(*chars);
    std::u32string s = utf8_to_u32(text);
    size_t b = 0, e = s.size();
    while (left && b < e && set.find(s[b]) != std::u32string::npos) ++b;
    while (right && e > b && set.find(s[e - 1]) != std::u32string::npos) --e;
    return u32_to_utf8(std::u32string_view(s).substr(b, e - b));
  }
  auto strip_this = [&](char c) { return chars ? chars->find(c) != std::string::npos : is_py_space(c); };
  size_t b = 0, e = text.size();
  while (left && b < e && strip_this(text[b])) ++b;
  while (right && e > b && strip_this(text[e - 1])) --e;
  return std::string(text.substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (!sep) {
    size_t i = 0;
    while (true) {
      while (i < text.size() && is_py_space(text[i])) ++i;
      if (i >= text.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = text.size();
        while (e > i && is_py_space(text[e - 1])) --e;
        parts.emplace_back(text.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < text.size() && !is_py_space(text[j])) ++j;
      parts.emplace_back(text.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  if (sep->empty()) op_fail("empty separator");
  size_t start = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
    const size_t found = text.find(*sep, start);
    if (found == std::string_view::npos) break;
    parts.emplace_back(text.substr(start, found - start));
    start = found + sep->size();
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

std::string py_replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement between every code point (and at both ends).
    const std::u32string cps = utf8_to_u32(text);
    int64_t done = 0;
    for (char32_t cp : cps) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      append_utf8(out, cp);
    }
    if (count < 0 || done < count) out += replacement;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = text.find(old, start);
    if (found == std::string_view::npos) break;
    out.append(text.substr(start, found - start));
    out.append(replacement);
    start = found + old.size();
    ++done;
  }
  out.append(text.substr(start));
  return out;
}

// Simple case mapping of the scripts chat text mostly uses (ASCII, Latin-1, Latin Extended-A,
// Greek, Cyrillic), as Python's str.lower()/upper() maps them. Other characters are unchanged.
char32_t lower_cp(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) || (c >= 0x410 && c <= 0x42F))
    return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177) ||
      (c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF))
    return (c % 2 == 0) ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c == 0x178) return 0xFF;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 0x3F;
  return c;
}

char32_t upper_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) || (c >= 0x430 && c <= 0x44F))
    return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177) ||
      (c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF))
    return (c % 2 == 1) ? c - 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 0x3F;
  return c;
}

bool is_cased(char32_t c) { return lower_cp(c) != c || upper_cp(c) != c || c == 0xDF; }

void append_upper(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "SS";  // ß has no single upper-case letter
  } else {
    append_utf8(out, upper_cp(c));
  }
}

std::string py_upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : utf8_to_u32(text)) append_upper(out, c);
  return out;
}

std::string py_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : utf8_to_u32(text)) append_utf8(out, lower_cp(c));
  return out;
}

std::string py_title(std::string_view text) {
  // Python: a cased character after an uncased one starts a word and is upper-cased; the
  // following cased characters are lower-cased.
  std::string out;
  out.reserve(text.size());
  bool previous_cased = false;
  for (char32_t c : utf8_to_u32(text)) {
    if (is_cased(c)) {
      if (previous_cased) {
        append_utf8(out, lower_cp(c));
      } else if (c == 0xDF) {
        out += "Ss";
      } else {
        append_utf8(out, upper_cp(c));
      }
      previous_cased = true;
    } else {
      append_utf8(out, c);
      previous_cased = false;
    }
  }
  return out;
}

std::string py_capitalize(std::string_view text) {
  std::u32string cps = utf8_to_u32(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) {
      if (cps[0] == 0xDF) {
        out += "Ss";
      } else {
        append_utf8(out, upper_cp(cps[0]));
      }
    } else {
      append_utf8(out, lower_cp(cps[i]));
    }
  }
  return out;
}

bool py_is_lower(std::string_view text) {
  bool cased = false;
  for (char32_t c : utf8_to_u32(text)) {
    if (upper_cp(c) == c && lower_cp(c) != c) return false;
    cased = cased || (is_cased(c) && lower_cp(c) == c);
  }
  return cased;
}

bool py_is_upper(std::string_view text) {
  bool cased = false;
  for (char32_t c : utf8_to_u32(text)) {
    if ((lower_cp(c) == c && upper_cp(c) != c) || c == 0xDF) return false;
    cased = cased || (is_cased(c) && upper_cp(c) == c);
  }
  return cased;
}

std::vector<int64_t> slice_indices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step) {
  const int64_t st = step.value_or(1);
  if (st == 0) op_fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t deflt, bool is_start) {
    if (!v) return deflt;
    int64_t x = *v;
    if (x < 0) x += length;
    if (st > 0) return std::clamp<int64_t>(x, 0, length);
    (void)is_start;
    return std::clamp<int64_t>(x, -1, length - 1);
  };
  std::vector<int64_t> out;
  if (st > 0) {
    const int64_t b = clamp(start, 0, true), e = clamp(stop, length, false);
    for (int64_t i = b; i < e; i += st) out.push_back(i);
  } else {
    const int64_t b = clamp(start, length - 1, true), e = clamp(stop, -1, false);
    for (int64_t i = b; i > e; i += st) out.push_back(i);
  }
  return out;
}

}  // namespace specula::jinja
