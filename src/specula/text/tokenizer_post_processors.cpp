#include "specula/text/tokenizer_post_processors.h"

#include <utility>

#include <fmt/format.h>

namespace specula::text {

namespace {

constexpr const char* kSupportedPostProcessors = "TemplateProcessing";

// The `single` template: a list of pieces, each either fixed special-token ids or the sequence.
class TemplateProcessing final : public PostProcessor {
 public:
  struct Piece {
    bool is_sequence = false;
    std::vector<int32_t> ids;  // special-token ids when !is_sequence
  };
  explicit TemplateProcessing(std::vector<Piece> single) : single_(std::move(single)) {}

  std::vector<int32_t> process(const std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Piece& p : single_) {
      if (p.is_sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), p.ids.begin(), p.ids.end());
      }
    }
    return out;
  }

 private:
  std::vector<Piece> single_;
};

std::unique_ptr<PostProcessor> make_template(const nlohmann::json& j, const JsonPath& at,
                                             const std::function<int32_t(const std::string&)>& token_id) {
  const nlohmann::json& specials = json_member(j, "special_tokens", at);
  if (!specials.is_object()) json_fail(at.field("special_tokens"), "expected an object");
  const nlohmann::json& single = json_member(j, "single", at);
  if (!single.is_array()) json_fail(at.field("single"), "expected an array (string templates are not supported)");
  std::vector<TemplateProcessing::Piece> pieces;
  for (size_t i = 0; i < single.size(); ++i) {
    const JsonPath pat = at.field("single").index(i);
    const nlohmann::json& item = single[i];
    TemplateProcessing::Piece piece;
    if (item.is_object() && item.contains("Sequence")) {
      piece.is_sequence = true;
    } else if (item.is_object() && item.contains("SpecialToken")) {
      const std::string name = json_string(item["SpecialToken"], "id", pat.field("SpecialToken"));
      const auto it = specials.find(name);
      if (it == specials.end()) json_fail(pat, "special token \"" + name + "\" is not listed in special_tokens");
      const JsonPath spath = at.field("special_tokens").field(name);
      const nlohmann::json& ids = json_member(*it, "ids", spath);
      const nlohmann::json& tokens = json_member(*it, "tokens", spath);
      if (!ids.is_array() || !tokens.is_array() || ids.size() != tokens.size()) {
        json_fail(spath, "ids and tokens must be arrays of the same length");
      }
      for (size_t k = 0; k < ids.size(); ++k) {
        if (!ids[k].is_number_unsigned()) json_fail(spath.field("ids").index(k), "expected a token id");
        const auto id = ids[k].get<int64_t>();
        const int32_t known = tokens[k].is_string() ? token_id(tokens[k].get<std::string>()) : -1;
        if (known != id) {
          json_fail(spath, fmt::format("token {} has id {} but the vocabulary says {}", tokens[k].dump(), id, known));
        }
        piece.ids.push_back(static_cast<int32_t>(id));
      }
    } else {
      json_fail(pat, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    pieces.push_back(std::move(piece));
  }
  return std::make_unique<TemplateProcessing>(std::move(pieces));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j, const JsonPath& at,
                                                   const std::function<int32_t(const std::string&)>& token_id) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, at);
  if (type == "TemplateProcessing") return make_template(j, at, token_id);
  unsupported_component(at, type, kSupportedPostProcessors);
}

}  // namespace specula::text
