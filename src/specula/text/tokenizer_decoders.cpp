#include "specula/text/tokenizer_decoders.h"

#include <utility>

#include "specula/text/tokenizer_utf8.h"

namespace specula::text {

namespace {

constexpr const char* kSupportedDecoders = "Replace, ByteFallback, Fuse, Strip, Sequence";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      if (t.find(pattern_) != std::string::npos) t = replace_literal(t, pattern_, content_);
    }
  }

 private:
  std::string pattern_, content_;
};

// Runs of <0xNN> tokens become the bytes they spell if those form valid UTF-8, otherwise one U+FFFD
// per byte (as Hugging Face does).
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (utf8_valid_prefix(bytes) == bytes.size()) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
    };
    for (std::string& t : tokens) {
      const int b = byte_fallback_value(t);
      if (b >= 0) {
        bytes.push_back(static_cast<char>(b));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of the character `content` per token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return;
    for (std::string& t : tokens) {
      size_t begin = 0, end = t.size();
      for (size_t i = 0; i < start_ && t.compare(begin, content_.size(), content_) == 0 && begin < end; ++i) {
        begin += content_.size();
      }
      for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                         t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i) {
        end -= content_.size();
      }
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

size_t json_count(const nlohmann::json& j, const char* key, const JsonPath& at) {
  const nlohmann::json& v = json_member(j, key, at);
  if (!v.is_number_unsigned()) json_fail(at.field(key), "expected a non-negative integer");
  return v.get<size_t>();
}

}  // namespace

int byte_fallback_value(std::string_view token) {
  if (token.size() != 6 || token[0] != '<' || token[1] != '0' || token[2] != 'x' || token[5] != '>') return -1;
  const int hi = hex_digit(token[3]), lo = hex_digit(token[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, at);
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(literal_pattern(json_member(j, "pattern", at), at.field("pattern")),
                                            json_string(j, "content", at));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const std::string content = json_string(j, "content", at);
    size_t len = 0;
    if (content.empty() || (utf8_decode(content, 0, &len), len != content.size())) {
      json_fail(at.field("content"), "expected exactly one character");
    }
    return std::make_unique<StripDecoder>(content, json_count(j, "start", at), json_count(j, "stop", at));
  }
  if (type == "Sequence") {
    const nlohmann::json& list = json_member(j, "decoders", at);
    if (!list.is_array()) json_fail(at.field("decoders"), "expected an array");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto p = make_decoder(list[i], at.field("decoders").index(i))) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  unsupported_component(at, type, kSupportedDecoders);
}

}  // namespace specula::text
