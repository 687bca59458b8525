#include "specula/text/tokenizer_normalizers.h"

#include <utility>
#include <vector>

#include "specula/text/tokenizer_utf8.h"

namespace specula::text {

namespace {

constexpr const char* kSupportedNormalizers = "Replace, Prepend, Strip, Sequence";

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    if (text.find(pattern_) != std::string::npos) text = replace_literal(text, pattern_, content_);
  }

 private:
  std::string pattern_, content_;
};

// Prepends a string to non-empty input (SentencePiece's "dummy prefix").
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// Removes Unicode whitespace from the left and/or right end.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t len = 0;
        if (!unicode_is_whitespace(utf8_decode(text, begin, &len))) break;
        begin += len;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t len = 0;
        if (!unicode_is_whitespace(utf8_decode(text, start, &len))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, at);
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(literal_pattern(json_member(j, "pattern", at), at.field("pattern")),
                                               json_string(j, "content", at));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(json_string(j, "prepend", at));
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(json_bool(j, "strip_left", at, true),
                                             json_bool(j, "strip_right", at, true));
  }
  if (type == "Sequence") {
    const nlohmann::json& list = json_member(j, "normalizers", at);
    if (!list.is_array()) json_fail(at.field("normalizers"), "expected an array");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto p = make_normalizer(list[i], at.field("normalizers").index(i))) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  unsupported_component(at, type, kSupportedNormalizers);
}

}  // namespace specula::text
