#include "specula/text/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "specula/text/tokenizer_bpe.h"
#include "specula/text/tokenizer_component.h"
#include "specula/text/tokenizer_decoders.h"
#include "specula/text/tokenizer_json.h"
#include "specula/text/tokenizer_normalizers.h"
#include "specula/text/tokenizer_post_processors.h"
#include "specula/text/tokenizer_pre_tokenizers.h"
#include "specula/util/error.h"

namespace specula::text {

namespace {

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& config, const JsonPath& root) {
  std::vector<AddedToken> out;
  const auto it = config.find("added_tokens");
  if (it == config.end() || it->is_null()) return out;
  const JsonPath at = root.field("added_tokens");
  if (!it->is_array()) json_fail(at, "expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& j = (*it)[i];
    const JsonPath p = at.index(i);
    AddedToken t;
    const nlohmann::json& id = json_member(j, "id", p);
    if (!id.is_number_unsigned() || id.get<uint64_t>() > 0x7FFFFFFF) json_fail(p.field("id"), "expected a token id");
    t.id = id.get<int32_t>();
    t.content = json_string(j, "content", p);
    t.special = json_bool(j, "special", p, false);
    t.single_word = json_bool(j, "single_word", p, false);
    t.lstrip = json_bool(j, "lstrip", p, false);
    t.rstrip = json_bool(j, "rstrip", p, false);
    t.normalized = json_bool(j, "normalized", p, !t.special);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
  std::string file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) file = (std::filesystem::path(path) / "tokenizer.json").string();
  if (!std::filesystem::exists(file, ec)) fail("tokenizer: {} does not exist", file);
  return from_file(load_tokenizer_json(file));
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  return from_file(parse_tokenizer_json(json_text, source));
}

Tokenizer Tokenizer::from_file(TokenizerFile&& file) {
  Tokenizer t;
  t.source_ = file.source;
  const JsonPath root{&t.source_, "$"};
  const nlohmann::json& cfg = file.config;
  auto member = [&](const char* key) -> const nlohmann::json& {
    static const nlohmann::json null_json;
    const auto it = cfg.find(key);
    return it == cfg.end() ? null_json : *it;
  };

  const nlohmann::json& model = member("model");
  const JsonPath model_path = root.field("model");
  if (!model.is_object()) json_fail(model_path, "missing model object");
  // Older files omit model.type for BPE; accept that like Hugging Face does.
  const std::string model_type = model.contains("type") ? component_type(model, model_path) : "BPE";
  if (model_type != "BPE") unsupported_component(model_path, model_type, "BPE");
  t.model_ = BpeModel::build(file, model, model_path);

  t.added_ = parse_added_tokens(cfg, root);
  size_t max_id = t.model_->vocab_size();
  for (size_t i = 0; i < t.added_.size(); ++i) {
    // Same bound as the model's ids: the id-indexed table below must not take gigabytes.
    if (t.added_[i].id > MergeMap::kMaxId) {
      json_fail(root.field("added_tokens").index(i),
                fmt::format("id {} exceeds the supported maximum {}", t.added_[i].id, MergeMap::kMaxId));
    }
    max_id = std::max(max_id, static_cast<size_t>(t.added_[i].id) + 1);
  }
  t.vocab_size_ = max_id;
  t.added_index_by_id_.assign(max_id, -1);
  std::vector<AddedToken> raw, normalized;
  for (size_t i = 0; i < t.added_.size(); ++i) {
    const AddedToken& a = t.added_[i];
    if (t.added_index_by_id_[a.id] < 0) t.added_index_by_id_[a.id] = static_cast<int32_t>(i);
    t.added_ids_.emplace(a.content, a.id);
    (a.normalized ? normalized : raw).push_back(a);
  }

  t.normalizer_ = make_normalizer(member("normalizer"), root.field("normalizer"));
  t.pre_tokenizer_ = make_pre_tokenizer(member("pre_tokenizer"), root.field("pre_tokenizer"));
  t.decoder_ = make_decoder(member("decoder"), root.field("decoder"));
  t.post_processor_ = make_post_processor(member("post_processor"), root.field("post_processor"),
                                          [&t](const std::string& tok) { return t.token_to_id(tok).value_or(-1); });

  // Normalized added tokens are matched in normalized text, so their content is normalized too.
  if (t.normalizer_) {
    for (AddedToken& a : normalized) t.normalizer_->normalize(a.content);
  }
  t.raw_matcher_ = AddedTokenMatcher(raw);
  t.normalized_matcher_ = AddedTokenMatcher(normalized);
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<AddedSplit> splits;
  raw_matcher_.split(text, splits);
  for (const AddedSplit& s : splits) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_text(std::string(text.substr(s.begin, s.end - s.begin)), ids);
    }
  }
  if (add_special_tokens && post_processor_) return post_processor_->process(ids);
  return ids;
}

void Tokenizer::encode_text(std::string text, std::vector<int32_t>& out) const {
  if (normalizer_) normalizer_->normalize(text);
  std::vector<std::string> words;
  auto encode_words = [&](std::string piece) {
    words.clear();
    words.push_back(std::move(piece));
    if (pre_tokenizer_) pre_tokenizer_->split(words);
    for (const std::string& w : words) model_->encode_word(w, out);
  };
  if (normalized_matcher_.empty()) {
    encode_words(std::move(text));
    return;
  }
  std::vector<AddedSplit> splits;
  normalized_matcher_.split(text, splits);
  for (const AddedSplit& s : splits) {
    if (s.id >= 0) {
      out.push_back(s.id);
    } else {
      encode_words(text.substr(s.begin, s.end - s.begin));
    }
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab_size_) {
      fail("tokenizer {}: token id {} is outside the vocabulary (0..{})", source_, id, vocab_size_ - 1);
    }
    const int32_t added = added_index_by_id_[id];
    if (added >= 0) {
      if (skip_special_tokens && added_[added].special) continue;
      tokens.push_back(added_[added].content);
    } else {
      tokens.emplace_back(model_->id_to_token(id));
    }
  }
  if (decoder_) decoder_->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto it = added_ids_.find(std::string(token)); it != added_ids_.end()) return it->second;
  const int32_t id = model_->token_to_id(token);
  if (id >= 0) return id;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_size_) return std::nullopt;
  if (const int32_t added = added_index_by_id_[id]; added >= 0) return added_[added].content;
  const std::string_view tok = model_->id_to_token(id);
  if (tok.empty()) return std::nullopt;
  return std::string(tok);
}

bool Tokenizer::is_special(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_size_) return false;
  const int32_t added = added_index_by_id_[id];
  return added >= 0 && added_[added].special;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (is_special(id)) return {};
  std::optional<std::string> piece = id_to_token(id);
  if (!piece) return {};
  if (const int byte = byte_fallback_value(*piece); byte >= 0) return std::string(1, static_cast<char>(byte));
  if (!decoder_) return *piece;
  std::vector<std::string> parts{std::move(*piece)};
  decoder_->decode_chain(parts);
  std::string out;
  for (const std::string& p : parts) out += p;
  return out;
}

void Tokenizer::set_cache_capacity(size_t words) { model_->set_cache_capacity(words); }

}  // namespace specula::text
