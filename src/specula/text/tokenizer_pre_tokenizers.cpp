#include "specula/text/tokenizer_pre_tokenizers.h"

#include <algorithm>
#include <utility>

namespace specula::text {

namespace {

constexpr const char* kSupportedPreTokenizers = "Split (String pattern), Sequence";

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::string pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void split(std::vector<std::string>& pieces) const override {
    std::vector<std::string> out;
    for (const std::string& p : pieces) split_on_literal(p, pattern_, behavior_, invert_, out);
    pieces = std::move(out);
  }

 private:
  std::string pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::vector<std::string>& pieces) const override {
    for (const auto& p : parts_) p->split(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

SplitBehavior parse_behavior(const std::string& name, const JsonPath& at) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  json_fail(at, "unknown split behavior \"" + name +
                    "\" (expected Removed, Isolated, MergedWithPrevious, "
                    "MergedWithNext or Contiguous)");
}

struct Segment {
  size_t begin, end;
  bool is_match;
};

}  // namespace

void split_on_literal(const std::string& text, const std::string& pattern, SplitBehavior behavior, bool invert,
                      std::vector<std::string>& out) {
  // Segments covering the whole text: the matches and the gaps between them (as HF's find_matches).
  std::vector<std::pair<size_t, size_t>> hits;
  find_literal(text, pattern, hits);
  std::vector<Segment> segs;
  size_t pos = 0;
  for (const auto& [b, e] : hits) {
    if (b > pos) segs.push_back({pos, b, false});
    segs.push_back({b, e, true});
    pos = e;
  }
  if (pos < text.size()) segs.push_back({pos, text.size(), false});
  if (invert) {
    for (Segment& s : segs) s.is_match = !s.is_match;
  }

  std::vector<std::pair<size_t, size_t>> ranges;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const Segment& s : segs) {
        if (!s.is_match) ranges.emplace_back(s.begin, s.end);
      }
      break;
    case SplitBehavior::Isolated:
      for (const Segment& s : segs) ranges.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Segment& s : segs) {
        if (s.is_match && !previous_match && !ranges.empty()) {
          ranges.back().second = s.end;
        } else {
          ranges.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (size_t i = segs.size(); i-- > 0;) {
        const Segment& s = segs[i];
        if (s.is_match && !previous_match && !ranges.empty()) {
          ranges.back().first = s.begin;
        } else {
          ranges.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      std::reverse(ranges.begin(), ranges.end());
      break;
    case SplitBehavior::Contiguous:
      for (size_t i = 0; i < segs.size(); ++i) {
        if (i > 0 && segs[i].is_match == previous_match) {
          ranges.back().second = segs[i].end;
        } else {
          ranges.emplace_back(segs[i].begin, segs[i].end);
        }
        previous_match = segs[i].is_match;
      }
      break;
  }
  for (const auto& [b, e] : ranges) {
    if (e > b) out.emplace_back(text, b, e - b);
  }
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, at);
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(literal_pattern(json_member(j, "pattern", at), at.field("pattern")),
                                               parse_behavior(json_string(j, "behavior", at), at.field("behavior")),
                                               json_bool(j, "invert", at, false));
  }
  if (type == "Sequence") {
    const nlohmann::json& list = json_member(j, "pretokenizers", at);
    if (!list.is_array()) json_fail(at.field("pretokenizers"), "expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto p = make_pre_tokenizer(list[i], at.field("pretokenizers").index(i))) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  unsupported_component(at, type, kSupportedPreTokenizers);
}

}  // namespace specula::text
