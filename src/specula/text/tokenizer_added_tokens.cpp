#include "specula/text/tokenizer_added_tokens.h"

#include <algorithm>
#include <map>
#include <memory>

#include "specula/text/tokenizer_utf8.h"

namespace specula::text {

namespace {

// Last character of s[0, end) (U+0000 when empty).
char32_t char_before(std::string_view s, size_t end) {
  if (end == 0) return 0;
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
  size_t len = 0;
  return utf8_decode(s.substr(0, end), start, &len);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  // Build a pointer trie, then flatten it into sorted edge arrays.
  struct BuildNode {
    std::map<unsigned char, std::unique_ptr<BuildNode>> children;
    int32_t pattern = -1;
  };
  BuildNode root;
  for (const AddedToken& t : tokens) {
    if (t.content.empty()) continue;
    BuildNode* node = &root;
    for (char c : t.content) {
      auto& child = node->children[static_cast<unsigned char>(c)];
      if (!child) child = std::make_unique<BuildNode>();
      node = child.get();
    }
    if (node->pattern >= 0) continue;  // the same content twice: the first one wins
    node->pattern = static_cast<int32_t>(patterns_.size());
    patterns_.push_back(t);
    first_byte_[static_cast<unsigned char>(t.content[0])] = true;
  }
  std::vector<const BuildNode*> order{&root};
  nodes_.push_back(Node{});
  for (size_t i = 0; i < order.size(); ++i) {
    const BuildNode* b = order[i];
    nodes_[i].pattern = b->pattern;
    nodes_[i].first_edge = static_cast<int32_t>(edges_.size());
    nodes_[i].edge_count = static_cast<int32_t>(b->children.size());
    for (const auto& [byte, child] : b->children) {
      edges_.push_back(Edge{byte, static_cast<int32_t>(order.size())});
      order.push_back(child.get());
      nodes_.push_back(Node{});
    }
  }
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t* len) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const Node& n = nodes_[node];
    const auto c = static_cast<unsigned char>(text[i]);
    const Edge* begin = edges_.data() + n.first_edge;
    const Edge* end = begin + n.edge_count;
    const Edge* e = std::lower_bound(begin, end, c, [](const Edge& a, unsigned char b) { return a.byte < b; });
    if (e == end || e->byte != c) break;
    node = e->child;
    if (nodes_[node].pattern >= 0) {
      best = nodes_[node].pattern;
      *len = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<AddedSplit>& out) const {
  out.clear();
  size_t emitted = 0;  // end of the previous added token (after its rstrip)
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t len = 0;
    const int32_t p = longest_at(text, pos, &len);
    if (p < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = patterns_[p];
    size_t start = pos, stop = pos + len;
    pos = stop;  // like an Aho-Corasick iterator, scanning resumes after the match even if rejected
    if (t.single_word) {
      const bool word_before = start > 0 && unicode_is_word_char(char_before(text, start));
      size_t clen = 0;
      const bool word_after = stop < text.size() && unicode_is_word_char(utf8_decode(text, stop, &clen));
      if (word_before || word_after) continue;
    }
    if (t.lstrip) {
      while (start > emitted) {
        const char32_t c = char_before(text, start);
        if (!unicode_is_whitespace(c)) break;
        start -= c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;  // whitespace is never U+FFFD
      }
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        size_t clen = 0;
        if (!unicode_is_whitespace(utf8_decode(text, stop, &clen))) break;
        stop += clen;
      }
      pos = stop;  // matches inside the stripped whitespace are skipped
    }
    if (start > emitted) out.push_back(AddedSplit{emitted, start, -1});
    out.push_back(AddedSplit{start, stop, t.id});
    emitted = stop;
  }
  if (emitted < text.size()) out.push_back(AddedSplit{emitted, text.size(), -1});
}

}  // namespace specula::text
