#pragma once
// The vocabulary as a byte trie, built once per tokenizer: the token mask (token_mask.h) walks it
// with the grammar state instead of testing every token, so a rejected prefix prunes every token
// that starts with it. Nodes are stored in depth-first preorder; a node's subtree is the index
// range [node, subtree_end), so skipping a subtree is one jump.
#include <cstdint>
#include <string>
#include <vector>

namespace specula::grammar {

class TokenTrie {
 public:
  // token_bytes[id] is the text token `id` stands for as raw bytes; an empty string marks a token
  // without text (control tokens), which no grammar allows. Throws specula::Error for a token
  // longer than 65535 bytes.
  explicit TokenTrie(std::vector<std::string> token_bytes);

  size_t vocab_size() const { return bytes_.size(); }
  const std::string& bytes_of(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

  size_t node_count() const { return byte_.size(); }
  uint8_t byte(size_t node) const { return byte_[node]; }
  uint16_t depth(size_t node) const { return depth_[node]; }  // 1 for the first byte
  uint32_t subtree_end(size_t node) const { return subtree_end_[node]; }
  // The tokens whose bytes end exactly at `node`.
  const int32_t* tokens_begin(size_t node) const { return token_ids_.data() + token_offset_[node]; }
  const int32_t* tokens_end(size_t node) const { return token_ids_.data() + token_offset_[node + 1]; }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> subtree_end_;
  std::vector<uint32_t> token_offset_;  // node_count + 1 entries
  std::vector<int32_t> token_ids_;
  size_t max_depth_ = 0;
};

}  // namespace specula::grammar
