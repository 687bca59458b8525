#include "specula/synth/gguf_tokenizer_export.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <vector>

#include "specula/text/chat_template.h"
#include "specula/text/gguf_tokenizer.h"
#include "specula/text/tokenizer_json.h"
#include "specula/util/error.h"

namespace specula::synth {

namespace {

namespace fs = std::filesystem;
using text::GgufTokenType;

// Control tokens llama.cpp's Gemma 4 converter types as user-defined, so that they are always
// rendered for its chat parser.
const std::set<std::string, std::less<>> kVisibleControlTokens = {
    "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"};

bool is_byte_token(std::string_view t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
  return t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex(t[3]) && hex(t[4]);
}

struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
};

// Token strings by id: the BPE vocabulary, with added tokens at their ids (also past its end).
GgufVocab vocab_of(const text::TokenizerFile& file) {
  size_t n = 0;
  for (const int64_t id : file.vocab_ids) n = std::max(n, static_cast<size_t>(id) + 1);
  const nlohmann::json& added =
      file.config.contains("added_tokens") ? file.config["added_tokens"] : nlohmann::json::array();
  for (const auto& a : added) n = std::max(n, a.at("id").get<size_t>() + 1);
  GgufVocab v;
  v.tokens.resize(n);
  v.types.assign(n, static_cast<int32_t>(GgufTokenType::Normal));
  const size_t base = n;
  for (size_t i = 0; i < file.vocab_ids.size(); ++i) {
    const auto id = static_cast<size_t>(file.vocab_ids[i]);
    v.tokens[id] = std::string(file.view(file.vocab_tokens[i]));
    if (is_byte_token(v.tokens[id])) v.types[id] = static_cast<int32_t>(GgufTokenType::Byte);
  }
  std::vector<bool> in_vocab(base, false);
  for (const int64_t id : file.vocab_ids) in_vocab[static_cast<size_t>(id)] = true;
  for (const auto& a : added) {
    const auto id = a.at("id").get<size_t>();
    const std::string content = a.at("content").get<std::string>();
    v.tokens[id] = content;
    GgufTokenType type = GgufTokenType::Normal;
    if (a.value("special", false)) {
      type = kVisibleControlTokens.contains(content) ? GgufTokenType::UserDefined : GgufTokenType::Control;
    } else if (!in_vocab[id]) {
      type = GgufTokenType::UserDefined;
    }
    v.types[id] = static_cast<int32_t>(type);
  }
  for (size_t id = 0; id < n; ++id)
    if (v.tokens[id].empty()) fail("{}: token id {} has no string (GGUF lists every id)", file.source, id);
  return v;
}

std::vector<std::string> merges_of(const text::TokenizerFile& file) {
  std::vector<std::string> out;
  out.reserve(file.merge_left.size());
  for (size_t i = 0; i < file.merge_left.size(); ++i) {
    const std::string_view l = file.view(file.merge_left[i]), r = file.view(file.merge_right[i]);
    if (l.find(' ') != std::string_view::npos || r.find(' ') != std::string_view::npos)
      fail("{}: merge {} holds a space, which the \"left right\" form of tokenizer.ggml.merges cannot", file.source, i);
    out.push_back(std::string(l) + " " + std::string(r));
  }
  return out;
}

std::optional<uint32_t> id_of(const GgufVocab& v, const nlohmann::ordered_json& special, const char* name) {
  const auto it = special.find(name);
  if (it == special.end() || !it->is_string()) return std::nullopt;
  const auto found = std::find(v.tokens.begin(), v.tokens.end(), it->get<std::string>());
  if (found == v.tokens.end()) return std::nullopt;
  return static_cast<uint32_t>(found - v.tokens.begin());
}

}  // namespace

void add_gguf_tokenizer(GgufWriter& w, const std::string& tokenizer_dir) {
  add_gguf_tokenizer(w, text::load_tokenizer_json((fs::path(tokenizer_dir) / "tokenizer.json").string()),
                     tokenizer_dir);
}

void add_gguf_tokenizer(GgufWriter& w, const text::TokenizerFile& file, const std::string& tokenizer_dir) {
  const fs::path dir(tokenizer_dir);
  const nlohmann::json& model = file.config.at("model");
  if (model.value("type", "BPE") != "BPE" || !model.value("byte_fallback", false) || !file.has_merges)
    fail("{}: not a byte-fallback BPE tokenizer, which is what a gemma4 GGUF tokenizer holds", file.source);
  const GgufVocab v = vocab_of(file);

  w.set_string("tokenizer.ggml.model", "gemma4");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_array("tokenizer.ggml.scores", std::vector<float>(v.tokens.size(), -1000.0f));
  w.set_array("tokenizer.ggml.token_type", v.types);
  w.set_string_array("tokenizer.ggml.merges", merges_of(file));

  const nlohmann::ordered_json special = tokenizer_special_tokens(dir);
  const std::pair<const char*, const char*> ids[] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                                     {"eos_token", "tokenizer.ggml.eos_token_id"},
                                                     {"unk_token", "tokenizer.ggml.unknown_token_id"},
                                                     {"pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& [name, key] : ids)
    if (const auto id = id_of(v, special, name)) w.set_u32(key, *id);
  w.set_bool("tokenizer.ggml.add_bos_token", true);  // the converter forces it for Gemma 4
  const fs::path config = dir / "tokenizer_config.json";
  if (fs::is_regular_file(config)) {
    std::ifstream in(config);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("add_eos_token") && j["add_eos_token"].is_boolean())
      w.set_bool("tokenizer.ggml.add_eos_token", j["add_eos_token"].get<bool>());
  }
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  if (has_chat_template(dir)) w.set_string("tokenizer.chat_template", ChatTemplate::from_model_dir(dir).source());
}

}  // namespace specula::synth
