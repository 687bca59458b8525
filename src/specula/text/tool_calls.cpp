#include "specula/text/tool_calls.h"

#include <cctype>

#include "specula/util/error.h"

namespace specula::text {

namespace {

using nlohmann::json;

// Recursive-descent reader of the Gemma tool value syntax.
class ToolValueParser {
 public:
  explicit ToolValueParser(std::string_view s) : s_(s) {}

  json object() {
    expect('{');
    json obj = json::object();
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return obj;
    }
    while (true) {
      skip_space();
      const std::string k = key();
      skip_space();
      expect(':');
      obj[k] = value();
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return obj;
    }
  }

  json value() {
    skip_space();
    if (starts_with(kToolStringDelimiter)) return string_literal();
    const char c = peek();
    if (c == '{') return object();
    if (c == '[') return array();
    return bare_literal();
  }

  size_t pos() const { return pos_; }
  bool at_end() {
    skip_space();
    return pos_ >= s_.size();
  }

 private:
  json array() {
    expect('[');
    json arr = json::array();
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      arr.push_back(value());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return arr;
    }
  }

  std::string string_literal() {
    pos_ += kToolStringDelimiter.size();
    const size_t end = s_.find(kToolStringDelimiter, pos_);
    if (end == std::string_view::npos) fail("tool call: string starting at byte {} is not closed by <|\"|>", pos_);
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + kToolStringDelimiter.size();
    return out;
  }

  std::string key() {
    if (starts_with(kToolStringDelimiter)) return string_literal();
    const size_t begin = pos_;
    while (pos_ < s_.size() && s_[pos_] != ':' && s_[pos_] != ',' && s_[pos_] != '}' && s_[pos_] != '{') ++pos_;
    std::string k(s_.substr(begin, pos_ - begin));
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.back()))) k.pop_back();
    if (k.empty()) fail("tool call: expected a key at byte {}", begin);
    return k;
  }

  // Numbers, true/false/null; anything else bare is kept as a string (models do write those).
  json bare_literal() {
    const size_t begin = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != '}' && s_[pos_] != ']') ++pos_;
    std::string_view tok = s_.substr(begin, pos_ - begin);
    while (!tok.empty() && std::isspace(static_cast<unsigned char>(tok.back()))) tok.remove_suffix(1);
    if (tok.empty()) fail("tool call: expected a value at byte {}", begin);
    if (tok == "true") return true;
    if (tok == "false") return false;
    if (tok == "null") return nullptr;
    if (looks_numeric(tok)) {
      json num = json::parse(tok, nullptr, /*allow_exceptions=*/false);
      if (num.is_number()) return num;
    }
    return std::string(tok);
  }

  static bool looks_numeric(std::string_view t) {
    const char c = t[0];
    return c == '-' || (c >= '0' && c <= '9');
  }

  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool starts_with(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  void expect(char c) {
    if (peek() != c) {
      if (pos_ >= s_.size()) fail("tool call: expected '{}' at byte {}, found the end", c, pos_);
      fail("tool call: expected '{}' at byte {}, found '{}'", c, pos_, s_[pos_]);
    }
    ++pos_;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// End of the brace-balanced body starting at text[pos] == '{' (braces inside <|"|> strings do not
// count), or npos.
size_t body_end(std::string_view text, size_t pos) {
  int depth = 0;
  while (pos < text.size()) {
    if (text.substr(pos, kToolStringDelimiter.size()) == kToolStringDelimiter) {
      const size_t close = text.find(kToolStringDelimiter, pos + kToolStringDelimiter.size());
      if (close == std::string_view::npos) return std::string_view::npos;
      pos = close + kToolStringDelimiter.size();
      continue;
    }
    if (text[pos] == '{') ++depth;
    if (text[pos] == '}' && --depth == 0) return pos + 1;
    ++pos;
  }
  return std::string_view::npos;
}

// Parses the inside of one block: one or more "call:NAME{...}".
std::vector<ToolCall> parse_block(std::string_view inner) {
  std::vector<ToolCall> calls;
  size_t pos = 0;
  auto skip = [&] {
    while (pos < inner.size() && (std::isspace(static_cast<unsigned char>(inner[pos])) || inner[pos] == ',')) ++pos;
  };
  skip();
  while (pos < inner.size()) {
    if (inner.substr(pos, 5) != "call:") fail("tool call: expected \"call:\" at byte {}", pos);
    pos += 5;
    const size_t name_begin = pos;
    while (pos < inner.size() && is_name_char(inner[pos])) ++pos;
    if (pos == name_begin) fail("tool call: missing function name at byte {}", name_begin);
    ToolCall call;
    call.name = std::string(inner.substr(name_begin, pos - name_begin));
    if (pos >= inner.size() || inner[pos] != '{') fail("tool call {}: expected '{{' after the name", call.name);
    const size_t end = body_end(inner, pos);
    if (end == std::string_view::npos) fail("tool call {}: unbalanced braces", call.name);
    call.arguments = parse_tool_call_arguments(inner.substr(pos, end - pos));
    calls.push_back(std::move(call));
    pos = end;
    skip();
  }
  if (calls.empty()) fail("tool call: empty block");
  return calls;
}

}  // namespace

nlohmann::json parse_tool_call_arguments(std::string_view body) {
  ToolValueParser p(body);
  json obj = p.object();
  if (!p.at_end()) fail("tool call: unexpected text after the arguments at byte {}", p.pos());
  return obj;
}

ToolCallExtraction extract_tool_calls(std::string_view text) {
  ToolCallExtraction out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t begin = text.find(kToolCallBegin, pos);
    if (begin == std::string_view::npos) break;
    out.content.append(text.substr(pos, begin - pos));
    const size_t inner_begin = begin + kToolCallBegin.size();
    const size_t end = text.find(kToolCallEnd, inner_begin);
    if (end == std::string_view::npos) {
      out.errors.push_back("tool call: <|tool_call> without a closing <tool_call|>");
      out.content.append(text.substr(begin));
      return out;
    }
    try {
      std::vector<ToolCall> calls = parse_block(text.substr(inner_begin, end - inner_begin));
      for (ToolCall& c : calls) out.calls.push_back(std::move(c));
    } catch (const Error& e) {
      out.errors.emplace_back(e.what());
      out.content.append(text.substr(begin, end + kToolCallEnd.size() - begin));
    }
    pos = end + kToolCallEnd.size();
  }
  if (pos < text.size()) out.content.append(text.substr(pos));
  return out;
}

}  // namespace specula::text
