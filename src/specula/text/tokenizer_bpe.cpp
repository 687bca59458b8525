#include "specula/text/tokenizer_bpe.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "specula/text/tokenizer_utf8.h"
#include "specula/util/error.h"

namespace specula::text {

namespace {

constexpr const char* kHex = "0123456789ABCDEF";

size_t string_hash(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xC2B2AE3D27D4EB4Full);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t k;
    std::memcpy(&k, s.data() + i, 8);
    h = (h ^ k) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  for (size_t j = 0; i + j < s.size(); ++j) tail |= uint64_t(static_cast<unsigned char>(s[i + j])) << (8 * j);
  h = (h ^ tail) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  return static_cast<size_t>(h);
}

// Power of two with a load factor of at most 2/3 (linear probing stays short, tables stay small
// enough for the cache to matter).
size_t table_size_for(size_t n) {
  size_t cap = 16;
  while (cap < n + n / 2) cap <<= 1;
  return cap;
}

// Heap entry of the merge loop: the lowest rank first, then the leftmost position.
struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t right;                              // index of the right symbol when queued
  int32_t left_id, right_id;                  // the pair's ids when queued: unchanged ids mean still valid
  bool operator<(const Candidate& o) const {  // "lower priority than" for std::push_heap
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

constexpr size_t kMaxCachedWordBytes = 256;

}  // namespace

// ---- TokenStringMap ----

void TokenStringMap::reserve(size_t n) {
  slots_.assign(table_size_for(n), Slot{});
  mask_ = slots_.size() - 1;
  size_ = 0;
  arena_.clear();
}

bool TokenStringMap::insert(std::string_view token, int32_t id) {
  if (slots_.empty() || (size_ + 1) * 3 > slots_.size() * 2) {
    // Grow: rehash everything (only happens if reserve was too small).
    std::vector<std::pair<std::string, int32_t>> old;
    for (const Slot& s : slots_) {
      if (s.id >= 0) old.emplace_back(arena_.substr(s.offset, s.length), s.id);
    }
    reserve(std::max<size_t>(16, (size_ + 1) * 2));
    for (auto& [k, v] : old) insert(k, v);
  }
  for (size_t i = string_hash(token) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.id < 0) {
      s.offset = static_cast<uint32_t>(arena_.size());
      s.length = static_cast<uint32_t>(token.size());
      s.id = id;
      arena_.append(token);
      ++size_;
      return true;
    }
    if (s.length == token.size() && std::string_view(arena_).substr(s.offset, s.length) == token) return false;
  }
}

void TokenStringMap::prefetch(std::string_view token) const {
  if (!slots_.empty()) __builtin_prefetch(&slots_[string_hash(token) & mask_]);
}

void TokenStringMap::prefetch_key(std::string_view token) const {
  if (!slots_.empty()) __builtin_prefetch(arena_.data() + slots_[string_hash(token) & mask_].offset);
}

int32_t TokenStringMap::find(std::string_view token) const {
  if (slots_.empty()) return -1;
  for (size_t i = string_hash(token) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.length == token.size() && std::memcmp(arena_.data() + s.offset, token.data(), token.size()) == 0) return s.id;
  }
}

// ---- MergeMap ----

void MergeMap::reserve(size_t n) {
  entries_.assign(table_size_for(n), kEmpty);
  mask_ = entries_.size() - 1;
  size_ = 0;
}

void MergeMap::insert_or_assign(int32_t left, int32_t right, uint32_t rank) {
  const uint64_t key = pack(left, right);
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    uint64_t& e = entries_[i];
    if (e == kEmpty) ++size_;
    if (e == kEmpty || (e & ~kRankMask) == key) {
      e = key | rank;
      return;
    }
  }
}

// ---- BpeModel ----

std::unique_ptr<BpeModel> BpeModel::build(const TokenizerFile& file, const nlohmann::json& model_json,
                                          const JsonPath& at) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  if (!file.has_vocab) json_fail(at.field("vocab"), "missing or not an object of token -> id");
  if (!file.has_merges && model_json.contains("merges") && !model_json["merges"].is_null()) {
    json_fail(at.field("merges"), "expected an array of merges");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model_json.find(key);
    if (it != model_json.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      unsupported_component(at.field(key), std::string("BPE ") + key, "null");
    }
  }
  if (const auto it = model_json.find("dropout"); it != model_json.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) {
      unsupported_component(at.field("dropout"), "BPE dropout (random merges)", "null");
    }
  }
  BpeOptions& o = m->options_;
  o.byte_fallback = json_bool(model_json, "byte_fallback", at, false);
  o.fuse_unk = json_bool(model_json, "fuse_unk", at, false);
  o.ignore_merges = json_bool(model_json, "ignore_merges", at, false);
  if (const auto it = model_json.find("unk_token"); it != model_json.end() && !it->is_null()) {
    if (!it->is_string()) json_fail(at.field("unk_token"), "expected a string");
    o.unk_token = it->get<std::string>();
  }

  // Vocabulary: string -> id and id -> string.
  const size_t n = file.vocab_tokens.size();
  int64_t max_id = -1;
  for (int64_t id : file.vocab_ids) max_id = std::max(max_id, id);
  // Checked before the id-indexed tables are sized: one huge id must not allocate gigabytes.
  if (max_id > MergeMap::kMaxId) {
    json_fail(at.field("vocab"), fmt::format("token id {} exceeds the supported maximum {}", max_id, MergeMap::kMaxId));
  }
  m->vocab_.reserve(n);
  m->id_tokens_.assign(static_cast<size_t>(max_id + 1), StringSpan{0, 0});
  std::vector<bool> seen(static_cast<size_t>(max_id + 1), false);
  m->id_strings_.reserve(file.strings.size() / 2);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view tok = file.view(file.vocab_tokens[i]);
    const auto id = static_cast<int32_t>(file.vocab_ids[i]);
    if (!m->vocab_.insert(tok, id)) json_fail(at.field("vocab"), fmt::format("token \"{}\" appears twice", tok));
    if (seen[id]) {
      json_fail(at.field("vocab"), fmt::format("id {} is used by both \"{}\" and \"{}\"", id, m->id_to_token(id), tok));
    }
    seen[id] = true;
    m->id_tokens_[id] = StringSpan{static_cast<uint32_t>(m->id_strings_.size()), static_cast<uint32_t>(tok.size())};
    m->id_strings_.append(tok);
  }

  // Fast path for single characters of the Basic Multilingual Plane.
  m->bmp_ids_.assign(0x10000, -1);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view tok = file.view(file.vocab_tokens[i]);
    if (tok.empty() || tok.size() > 3) continue;
    size_t len = 0;
    const char32_t cp = utf8_decode(tok, 0, &len);
    if (len == tok.size() && cp < 0x10000 && !(cp == 0xFFFD && tok != "\xEF\xBF\xBD")) {
      m->bmp_ids_[cp] = static_cast<int32_t>(file.vocab_ids[i]);
    }
  }
  char byte_token[7] = {'<', '0', 'x', 0, 0, '>', 0};
  for (int b = 0; b < 256; ++b) {
    byte_token[3] = kHex[b >> 4];
    byte_token[4] = kHex[b & 15];
    m->byte_ids_[b] = m->vocab_.find(std::string_view(byte_token, 6));
  }
  if (!o.unk_token.empty()) m->unk_id_ = m->vocab_.find(o.unk_token);

  // Merges: rank = position in the list; the merged token must be in the vocabulary.
  const size_t merge_count = file.merge_left.size();
  if (static_cast<int64_t>(merge_count) > MergeMap::kMaxRank + 1) {
    json_fail(at.field("merges"),
              fmt::format("{} merges exceed the supported {}", merge_count, MergeMap::kMaxRank + 1));
  }
  // Lookups are prefetched kAhead merges in advance: loading is bound by cache misses.
  constexpr size_t kAhead = 16;
  std::string joined_ring[kAhead + 1];  // merge i's concatenation lives in slot i % (kAhead + 1)
  auto stage = [&](size_t i) {
    const std::string_view l = file.view(file.merge_left[i]), r = file.view(file.merge_right[i]);
    std::string& joined = joined_ring[i % (kAhead + 1)];
    joined.assign(l);
    joined.append(r);
    m->vocab_.prefetch(l);
    m->vocab_.prefetch(r);
    m->vocab_.prefetch(joined);
  };
  struct Resolved {
    int32_t left, right, merged;
  };
  std::vector<Resolved> resolved(merge_count);
  auto stage2 = [&](size_t i) {
    m->vocab_.prefetch_key(file.view(file.merge_left[i]));
    m->vocab_.prefetch_key(file.view(file.merge_right[i]));
    m->vocab_.prefetch_key(joined_ring[i % (kAhead + 1)]);
  };
  for (size_t i = 0; i < std::min(kAhead, merge_count); ++i) stage(i);
  for (size_t i = 0; i < std::min(kAhead / 2, merge_count); ++i) stage2(i);
  for (size_t i = 0; i < merge_count; ++i) {
    if (i + kAhead / 2 < merge_count) stage2(i + kAhead / 2);
    const std::string_view l = file.view(file.merge_left[i]), r = file.view(file.merge_right[i]);
    const int32_t lid = m->vocab_.find(l), rid = m->vocab_.find(r);
    const std::string& joined = joined_ring[i % (kAhead + 1)];
    if (i + kAhead < merge_count) stage(i + kAhead);
    const int32_t mid = m->vocab_.find(joined);
    if (lid < 0 || rid < 0 || mid < 0) {
      const std::string_view missing = lid < 0 ? l : rid < 0 ? r : std::string_view(joined);
      json_fail(at.field("merges").index(i), fmt::format("merge (\"{}\", \"{}\") uses \"{}\", which is not in the "
                                                         "vocabulary",
                                                         l, r, missing));
    }
    resolved[i] = Resolved{lid, rid, mid};
  }
  m->merges_.reserve(merge_count);
  m->merged_by_rank_.resize(merge_count);
  for (size_t i = 0; i < merge_count; ++i) {
    if (i + kAhead < merge_count) m->merges_.prefetch(resolved[i + kAhead].left, resolved[i + kAhead].right);
    m->merges_.insert_or_assign(resolved[i].left, resolved[i].right, static_cast<uint32_t>(i));
    m->merged_by_rank_[i] = resolved[i].merged;
  }
  return m;
}

std::string_view BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_tokens_.size()) return {};
  const StringSpan s = id_tokens_[id];
  return std::string_view(id_strings_).substr(s.offset, s.length);
}

void BpeModel::set_cache_capacity(size_t words) {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  options_.cache_capacity = words;
  cache_.clear();
}

int32_t BpeModel::char_id(std::string_view ch) const {
  size_t len = 0;
  const char32_t cp = utf8_decode(ch, 0, &len);
  if (len == ch.size() && cp < 0x10000 && !(cp == 0xFFFD && ch != "\xEF\xBF\xBD")) return bmp_ids_[cp];
  return vocab_.find(ch);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = options_.cache_capacity > 0 && word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  encode_uncached(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < options_.cache_capacity) {
      cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + static_cast<ptrdiff_t>(start), out.end()));
    }
  }
}

void BpeModel::encode_uncached(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    if (const int32_t id = vocab_.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // Reused between calls on the same thread: words can be long (Gemma splits only at added tokens).
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();

  auto push_symbol = [&](int32_t id) {
    const auto idx = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, idx - 1, -1, true});
    if (idx > 0) symbols[idx - 1].next = idx;
  };
  bool pending_unk = false;  // fuse_unk: consecutive unknown characters become one <unk>
  for (size_t pos = 0; pos < word.size();) {
    size_t len = 0;
    utf8_decode(word, pos, &len);  // malformed bytes end a "character" early; they fall back to bytes
    const std::string_view ch = word.substr(pos, len);
    pos += len;
    const int32_t id = char_id(ch);
    if (id >= 0) {
      if (pending_unk) push_symbol(unk_id_);
      pending_unk = false;
      push_symbol(id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        if (pending_unk) push_symbol(unk_id_);
        pending_unk = false;
        for (char c : ch) push_symbol(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (options_.unk_token.empty()) continue;  // no unknown token: the character is dropped
    if (unk_id_ < 0) fail("tokenizer: unk_token \"{}\" is not in the vocabulary", options_.unk_token);
    if (options_.fuse_unk) {
      pending_unk = true;
    } else {
      push_symbol(unk_id_);
    }
  }
  if (pending_unk) push_symbol(unk_id_);

  const auto count = static_cast<int32_t>(symbols.size());
  constexpr int32_t kAhead = 8;  // pair lookups are independent here: overlap their cache misses
  for (int32_t i = 0; i + 1 < std::min(count, kAhead); ++i) merges_.prefetch(symbols[i].id, symbols[i + 1].id);
  for (int32_t i = 0; i + 1 < count; ++i) {
    if (i + kAhead + 1 < count) merges_.prefetch(symbols[i + kAhead].id, symbols[i + kAhead + 1].id);
    if (const int64_t rank = merges_.find(symbols[i].id, symbols[i + 1].id); rank >= 0) {
      heap.push_back(Candidate{static_cast<uint32_t>(rank), i, i + 1, symbols[i].id, symbols[i + 1].id});
    }
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    // Stale if either side was merged since this candidate was queued (merging always changes the
    // surviving symbol's id and kills the right one).
    if (!left.alive || left.next != top.right || left.id != top.left_id) continue;
    Symbol& right = symbols[top.right];
    if (right.id != top.right_id) continue;
    left.id = merged_by_rank_[top.rank];
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    // Both neighbor lookups miss the cache independently: start both loads before using either.
    if (left.prev >= 0) merges_.prefetch(symbols[left.prev].id, left.id);
    if (left.next >= 0) merges_.prefetch(left.id, symbols[left.next].id);
    if (left.prev >= 0) {
      if (const int64_t rank = merges_.find(symbols[left.prev].id, left.id); rank >= 0) {
        heap.push_back(Candidate{static_cast<uint32_t>(rank), left.prev, top.pos, symbols[left.prev].id, left.id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (left.next >= 0) {
      if (const int64_t rank = merges_.find(left.id, symbols[left.next].id); rank >= 0) {
        heap.push_back(Candidate{static_cast<uint32_t>(rank), top.pos, left.next, left.id, symbols[left.next].id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
  }
  for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace specula::text
