#pragma once
// Added tokens of tokenizer.json (control tokens like <|turn>, and plain ones like "\n" or
// "<table>"): matched verbatim in the input before the model sees it, leftmost-longest, honoring
// the single_word / lstrip / rstrip flags the way Hugging Face tokenizers does.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specula::text {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// One piece of split input: an added token (id >= 0) or text for the model (id == -1).
struct AddedSplit {
  size_t begin = 0, end = 0;
  int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  bool empty() const { return patterns_.empty(); }
  // Splits `text` into added-token matches and the text between them (no empty text pieces).
  void split(std::string_view text, std::vector<AddedSplit>& out) const;

 private:
  struct Node {
    int32_t first_edge = 0;
    int32_t edge_count = 0;
    int32_t pattern = -1;  // index into patterns_ when a token ends here
  };
  struct Edge {
    unsigned char byte;
    int32_t child;
  };
  // Longest pattern starting at text[pos] (-1 if none); `len` gets its length.
  int32_t longest_at(std::string_view text, size_t pos, size_t* len) const;

  std::vector<AddedToken> patterns_;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  bool first_byte_[256] = {};
};

}  // namespace specula::text
