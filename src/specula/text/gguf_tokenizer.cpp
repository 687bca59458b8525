#include "specula/text/gguf_tokenizer.h"

#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "specula/io/gguf.h"
#include "specula/text/tokenizer_bpe.h"
#include "specula/util/error.h"

namespace specula::text {

namespace {

using nlohmann::json;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // "▁", what spaces become before BPE

// A value from the file for an error message: printable ASCII, at most 64 characters.
std::string shown(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 64)) out += (c >= 0x20 && c < 0x7F) ? c : '?';
  if (s.size() > 64) out += "...";
  return out;
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Newlines, tabs and "▁" only, and not the lone "▁": Gemma's whitespace-run added tokens.
bool is_whitespace_run(std::string_view s) {
  if (s.empty() || s == kSpaceMarker) return false;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\n' || s[i] == '\t') {
      ++i;
    } else if (s.substr(i, kSpaceMarker.size()) == kSpaceMarker) {
      i += kSpaceMarker.size();
    } else {
      return false;
    }
  }
  return true;
}

void require_gemma4_model(const GgufFile& f) {
  const std::optional<std::string_view> model = f.find_string("tokenizer.ggml.model");
  if (!model) {
    fail("{}: has no tokenizer (metadata key 'tokenizer.ggml.model' is missing)", f.path());
  }
  if (*model != "gemma4") {
    fail(
        "{}: tokenizer.ggml.model is \"{}\", a tokenizer specula does not read from GGUF (it reads Gemma 4's "
        "\"gemma4\")",
        f.path(), shown(*model));
  }
}

// A token id from an optional key, checked against the token count.
std::optional<int32_t> token_id(const GgufFile& f, const char* key, size_t count) {
  const std::optional<int64_t> id = f.find_int(key);
  if (!id) return std::nullopt;
  if (*id < 0 || static_cast<uint64_t>(*id) >= count)
    fail("{}: metadata key '{}' = {} is outside the {} tokens of 'tokenizer.ggml.tokens'", f.path(), key, *id, count);
  return static_cast<int32_t>(*id);
}

// The validated token arrays of the file.
struct GgufVocabulary {
  std::span<const std::string_view> tokens;
  std::vector<int64_t> types;
  std::vector<std::pair<std::string_view, std::string_view>> merges;  // (left, right) by rank
};

GgufVocabulary read_vocabulary(const GgufFile& f) {
  GgufVocabulary v;
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  const size_t n = v.tokens.size();
  if (n == 0) fail("{}: metadata key 'tokenizer.ggml.tokens' is empty", f.path());
  if (n > static_cast<size_t>(MergeMap::kMaxId) + 1)
    fail("{}: metadata key 'tokenizer.ggml.tokens' has {} tokens; specula supports at most {}", f.path(), n,
         MergeMap::kMaxId + 1);
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string_view t = v.tokens[i];
    if (t.empty()) fail("{}: metadata key 'tokenizer.ggml.tokens'[{}] is empty", f.path(), i);
    if (t.size() > kGgufMaxTokenBytes)
      fail("{}: metadata key 'tokenizer.ggml.tokens'[{}] has {} bytes; the limit is {}", f.path(), i, t.size(),
           kGgufMaxTokenBytes);
    bytes += t.size();
  }

  v.types = f.get_int_array("tokenizer.ggml.token_type");
  if (v.types.size() != n)
    fail("{}: metadata key 'tokenizer.ggml.token_type' has {} entries but 'tokenizer.ggml.tokens' has {}", f.path(),
         v.types.size(), n);
  for (size_t i = 0; i < n; ++i)
    if (v.types[i] < 0 || v.types[i] > static_cast<int64_t>(GgufTokenType::Byte))
      fail("{}: metadata key 'tokenizer.ggml.token_type'[{}] = {} is not a ggml token type (0..6)", f.path(), i,
           v.types[i]);
  // Scores are placeholders for this tokenizer (BPE ranks come from the merges), but an array
  // that does not match the tokens means the file is not what it claims.
  if (const GgufKv* scores = f.find_kv("tokenizer.ggml.scores"); scores && scores->count != n)
    fail("{}: metadata key 'tokenizer.ggml.scores' has {} entries but 'tokenizer.ggml.tokens' has {}", f.path(),
         scores->count, n);

  const std::span<const std::string_view> merges = f.get_string_array("tokenizer.ggml.merges");
  if (merges.size() > static_cast<size_t>(MergeMap::kMaxRank) + 1)
    fail("{}: metadata key 'tokenizer.ggml.merges' has {} merges; specula supports at most {}", f.path(), merges.size(),
         MergeMap::kMaxRank + 1);
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view m = merges[i];
    // "left right": the separator is the first space after the first byte (a left half never
    // is empty, and tokens hold "▁", not spaces).
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos || space + 1 == m.size())
      fail("{}: metadata key 'tokenizer.ggml.merges'[{}] (\"{}\") is not \"left right\"", f.path(), i, shown(m));
    v.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    bytes += m.size();
  }
  if (bytes > kGgufMaxTokenizerBytes)
    fail("{}: the tokens and merges hold {} bytes; the limit is {}", f.path(), bytes, kGgufMaxTokenizerBytes);
  return v;
}

// Which ids repeat an earlier token's string, and which some merge produces.
struct TokenIndex {
  std::vector<bool> repeated;
  std::vector<bool> merged;
};

TokenIndex index_tokens(const GgufFile& f, const GgufVocabulary& v) {
  const size_t n = v.tokens.size();
  TokenIndex out{std::vector<bool>(n, false), std::vector<bool>(n, false)};
  // String -> first id. A string that comes again names an added token of tokenizer.json (its
  // vocabulary keys are unique), which whole-token matching resolves to the later id.
  std::unordered_map<std::string_view, int32_t> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!ids.emplace(v.tokens[i], static_cast<int32_t>(i)).second) out.repeated[i] = true;
  }
  std::string joined;
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const auto& [left, right] = v.merges[r];
    joined.assign(left).append(right);
    // Only the merged token is looked up here (the BPE model checks the halves): loading is
    // bound by these lookups.
    const auto it = ids.find(joined);
    if (it == ids.end())
      fail("{}: metadata key 'tokenizer.ggml.merges'[{}] (\"{} {}\") makes a token outside 'tokenizer.ggml.tokens'",
           f.path(), r, shown(left), shown(right));
    out.merged[static_cast<size_t>(it->second)] = true;
  }
  return out;
}

json model_json(const GgufFile& f, const GgufVocabulary& v) {
  json model = {{"type", "BPE"},         {"dropout", nullptr},     {"fuse_unk", true},
                {"byte_fallback", true}, {"ignore_merges", false}, {"unk_token", nullptr}};
  if (const auto unk = token_id(f, "tokenizer.ggml.unknown_token_id", v.tokens.size()))
    model["unk_token"] = std::string(v.tokens[*unk]);
  return model;
}

json normalizer_json(const GgufFile& f) {
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpaceMarker}};
  if (!f.find_bool("tokenizer.ggml.add_space_prefix").value_or(false)) return replace;
  return {{"type", "Sequence"},
          {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", kSpaceMarker}}, replace})}};
}

json decoder_json() {
  return {{"type", "Sequence"},
          {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", kSpaceMarker}}}, {"content", " "}},
                                    {{"type", "ByteFallback"}},
                                    {{"type", "Fuse"}}})}};
}

// add_bos_token (on unless the file says otherwise, as llama.cpp does for this tokenizer) and
// add_eos_token as tokenizer.json's TemplateProcessing.
json post_processor_json(const GgufFile& f, const GgufVocabulary& v) {
  const bool add_bos = f.find_bool("tokenizer.ggml.add_bos_token").value_or(true);
  const bool add_eos = f.find_bool("tokenizer.ggml.add_eos_token").value_or(false);
  if (!add_bos && !add_eos) return nullptr;
  json single = json::array();
  json specials = json::object();
  auto special = [&](const char* key) {
    const auto id = token_id(f, key, v.tokens.size());
    if (!id) fail("{}: metadata key '{}' is missing (the tokenizer adds that token)", f.path(), key);
    const std::string tok(v.tokens[*id]);
    specials[tok] = {{"id", tok}, {"ids", json::array({static_cast<uint32_t>(*id)})}, {"tokens", json::array({tok})}};
    return json{{"SpecialToken", {{"id", tok}, {"type_id", 0}}}};
  };
  if (add_bos) single.push_back(special("tokenizer.ggml.bos_token_id"));
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (add_eos) single.push_back(special("tokenizer.ggml.eos_token_id"));
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
}

}  // namespace

TokenizerFile gguf_tokenizer_file(const GgufFile& f) {
  require_gemma4_model(f);
  const GgufVocabulary v = read_vocabulary(f);
  const size_t n = v.tokens.size();
  const TokenIndex index = index_tokens(f, v);

  TokenizerFile file;
  file.source = f.path();
  file.has_vocab = true;
  file.has_merges = true;
  auto intern = [&file](std::string_view s) {
    const StringSpan span{static_cast<uint32_t>(file.strings.size()), static_cast<uint32_t>(s.size())};
    file.strings.append(s);
    return span;
  };
  json added = json::array();
  for (size_t i = 0; i < n; ++i) {
    const std::string_view tok = v.tokens[i];
    const auto type = static_cast<GgufTokenType>(v.types[i]);
    const bool special =
        type == GgufTokenType::Control || type == GgufTokenType::UserDefined || type == GgufTokenType::Unknown;
    const bool matched_whole =
        special || index.repeated[i] ||
        (type != GgufTokenType::Byte && ((code_points(tok) > 1 && !index.merged[i]) || is_whitespace_run(tok)));
    if (!index.repeated[i]) {
      file.vocab_tokens.push_back(intern(tok));
      file.vocab_ids.push_back(static_cast<int64_t>(i));
    }
    if (matched_whole) {
      added.push_back({{"id", i},
                       {"content", tok},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", special}});
    }
  }
  file.merge_left.reserve(v.merges.size());
  file.merge_right.reserve(v.merges.size());
  for (const auto& [left, right] : v.merges) {
    file.merge_left.push_back(intern(left));
    file.merge_right.push_back(intern(right));
  }

  file.config = {{"version", "1.0"},
                 {"added_tokens", std::move(added)},
                 {"normalizer", normalizer_json(f)},
                 {"pre_tokenizer", nullptr},
                 {"post_processor", post_processor_json(f, v)},
                 {"decoder", decoder_json()},
                 {"model", model_json(f, v)}};
  return file;
}

Tokenizer gguf_tokenizer(const GgufFile& f) { return Tokenizer::from_file(gguf_tokenizer_file(f)); }

std::optional<std::string> gguf_chat_template(const GgufFile& f, const std::string& name) {
  const std::string key = name.empty() ? "tokenizer.chat_template" : "tokenizer.chat_template." + name;
  const std::optional<std::string_view> text = f.find_string(key);
  if (!text) return std::nullopt;
  return std::string(*text);
}

nlohmann::ordered_json gguf_special_tokens(const GgufFile& f) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  const GgufKv* tokens = f.find_kv("tokenizer.ggml.tokens");
  if (!tokens || !tokens->is_array() || tokens->array_type != GgufType::STRING) return out;
  const std::pair<const char*, const char*> names[] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                                       {"eos_token", "tokenizer.ggml.eos_token_id"},
                                                       {"unk_token", "tokenizer.ggml.unknown_token_id"},
                                                       {"pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& [name, key] : names) {
    const GgufKv* kv = f.find_kv(key);
    if (!kv || kv->is_array()) continue;
    std::optional<int64_t> id;
    try {
      id = f.find_int(key);
    } catch (const Error&) {  // not an integer: no such template variable
      continue;
    }
    if (id && *id >= 0 && static_cast<uint64_t>(*id) < tokens->strings.size())
      out[name] = std::string(tokens->strings[static_cast<size_t>(*id)]);
  }
  return out;
}

}  // namespace specula::text
