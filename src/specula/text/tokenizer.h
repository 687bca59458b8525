#pragma once
// A Hugging Face tokenizer.json tokenizer, implemented from the format's description (no library):
// added tokens matched verbatim first, then normalizer -> pre-tokenizer -> BPE model for the text
// between them, and the post-processor when special tokens are requested; decoding runs the
// decoder chain over the token strings. Components specula does not implement are rejected at load
// time with their type and JSON path.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "specula/text/tokenizer_added_tokens.h"

namespace specula::text {

class BpeModel;
class Decoder;
class Normalizer;
class PostProcessor;
class PreTokenizer;
struct TokenizerFile;

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory containing one. Throws specula::Error.
  static Tokenizer load(const std::string& path);
  // From tokenizer.json text; `source` names it in error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& source = "tokenizer.json");
  static Tokenizer from_file(TokenizerFile&& file);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special_tokens: apply the post-processor (Gemma: prepend <bos>). Control tokens written in
  // the text are always matched as tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Throws specula::Error for ids outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // One past the largest id (model vocabulary and added tokens).
  size_t vocab_size() const { return vocab_size_; }
  bool is_special(int32_t id) const;
  // The raw bytes token `id` adds to decoded text (a byte-fallback token: its one byte, even when
  // that is part of a multi-byte character); empty for special tokens and ids without a token.
  std::string token_bytes(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const std::string& source() const { return source_; }

  // Words of up to 256 bytes are cached (default 10 000 entries); 0 disables the cache.
  void set_cache_capacity(size_t words);

 private:
  Tokenizer();
  void encode_text(std::string text, std::vector<int32_t>& out) const;

  std::string source_;
  std::vector<AddedToken> added_;
  std::unordered_map<std::string, int32_t> added_ids_;  // content -> id
  std::vector<int32_t> added_index_by_id_;              // id -> index into added_ (-1: not an added token)
  AddedTokenMatcher raw_matcher_;                       // tokens with normalized == false, matched on the input
  AddedTokenMatcher normalized_matcher_;                // tokens with normalized == true, matched after normalizing
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  size_t vocab_size_ = 0;
};

}  // namespace specula::text
