#include "specula/grammar/token_trie.h"

#include <algorithm>
#include <numeric>

#include "specula/util/error.h"

namespace specula::grammar {

TokenTrie::TokenTrie(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].size() > 65535) fail("token trie: token {} is {} bytes long (limit 65535)", id, bytes_[id].size());
    if (!bytes_[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const auto& x = bytes_[static_cast<size_t>(a)];
    const auto& y = bytes_[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  // Sorted strings visit the trie in preorder: each one shares a prefix with the previous path
  // and adds nodes for the rest.
  std::vector<uint32_t> path;  // node index per depth - 1
  std::string previous;
  std::vector<uint32_t> tokens_at;  // per node: count, turned into offsets below
  for (const int32_t id : order) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < s.size() && common < previous.size() && s[common] == previous[common]) ++common;
    common = std::min(common, path.size());
    while (path.size() > common) {
      subtree_end_[path.back()] = static_cast<uint32_t>(byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(s[d]));
      depth_.push_back(static_cast<uint16_t>(d + 1));
      subtree_end_.push_back(0);
      tokens_at.push_back(0);
    }
    tokens_at[path.back()] += 1;
    token_ids_.push_back(id);  // ids in node order: sorted strings put a node's tokens together
    max_depth_ = std::max(max_depth_, s.size());
    previous = s;
  }
  while (!path.empty()) {
    subtree_end_[path.back()] = static_cast<uint32_t>(byte_.size());
    path.pop_back();
  }
  token_offset_.assign(byte_.size() + 1, 0);
  for (size_t i = 0; i < byte_.size(); ++i) token_offset_[i + 1] = token_offset_[i] + tokens_at[i];
}

}  // namespace specula::grammar
