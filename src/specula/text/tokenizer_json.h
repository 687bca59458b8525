#pragma once
// Reading a Hugging Face tokenizer.json. The vocabulary (262 144 entries for Gemma) and the merges
// (about 515 000 pairs) are most of the 16 MB file, so they are streamed straight into flat arrays
// by a SAX handler instead of being built as a JSON DOM; everything else (normalizer,
// pre_tokenizer, added_tokens, ...) is small and kept as a DOM for the component factories.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace specula::text {

struct StringSpan {
  uint32_t offset = 0;
  uint32_t length = 0;
};

struct TokenizerFile {
  std::string source;      // file path or a caller-given name, used in error messages
  nlohmann::json config;   // the whole document minus model.vocab and model.merges
  bool has_vocab = false;  // model.vocab was an object (BPE / WordPiece style)
  bool has_merges = false;
  std::string strings;                   // arena holding every vocab token and merge half
  std::vector<StringSpan> vocab_tokens;  // model.vocab keys, in file order
  std::vector<int64_t> vocab_ids;        // their ids
  std::vector<StringSpan> merge_left;    // model.merges[i] = (left, right)
  std::vector<StringSpan> merge_right;

  std::string_view view(StringSpan s) const { return std::string_view(strings).substr(s.offset, s.length); }
};

// Parses tokenizer.json text. Throws specula::Error naming `source` and the position on malformed
// JSON, and the JSON path on structurally wrong vocab/merges entries.
TokenizerFile parse_tokenizer_json(std::string_view json_text, const std::string& source);

// Reads and parses a tokenizer.json file.
TokenizerFile load_tokenizer_json(const std::string& path);

}  // namespace specula::text
