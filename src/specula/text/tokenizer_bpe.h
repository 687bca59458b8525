#pragma once
// The BPE model of tokenizer.json: a vocabulary, ranked merges, byte fallback (<0xNN> tokens for
// characters outside the vocabulary) and an unknown token. Encoding a word starts from its
// characters and repeatedly applies the lowest-ranked applicable merge (leftmost first on ties),
// exactly as Hugging Face tokenizers does, using a heap over a linked list of symbols.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/text/tokenizer_component.h"
#include "specula/text/tokenizer_json.h"

namespace specula::text {

// Open-addressing map from token strings (kept in one arena) to ids.
class TokenStringMap {
 public:
  void reserve(size_t n);
  // Returns false if `token` is already present.
  bool insert(std::string_view token, int32_t id);
  int32_t find(std::string_view token) const;  // -1 when absent
  // Hints the cache that `token` will be looked up soon (loading does ~1.5 M random lookups).
  void prefetch(std::string_view token) const;
  // Second stage: once the slot is cached, prefetch the stored string it points to.
  void prefetch_key(std::string_view token) const;
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t offset = 0, length = 0;
    int32_t id = -1;
  };
  std::string arena_;
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

// Open-addressing map from a (left id, right id) pair to its merge rank. Each entry is one 64-bit
// word (21-bit ids, 22-bit rank) so the 515 000 Gemma merges fit in 8 MB: encoding is bound by
// cache misses on this table.
class MergeMap {
 public:
  static constexpr int64_t kMaxId = (int64_t{1} << 21) - 2;  // the all-ones id marks empty slots
  static constexpr int64_t kMaxRank = (int64_t{1} << 22) - 1;

  void reserve(size_t n);
  // A repeated pair keeps its last rank, as Hugging Face's HashMap collect does.
  void insert_or_assign(int32_t left, int32_t right, uint32_t rank);
  // The pair's rank, or -1.
  int64_t find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const uint64_t e = entries_[i];
      if ((e & ~kRankMask) == key) return static_cast<int64_t>(e & kRankMask);
      if (e == kEmpty) return -1;
    }
  }
  void prefetch(int32_t left, int32_t right) const { __builtin_prefetch(&entries_[hash(pack(left, right)) & mask_]); }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static constexpr uint64_t kRankMask = (uint64_t{1} << 22) - 1;
  static uint64_t pack(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 43) | (uint64_t(uint32_t(r)) << 22); }
  static size_t hash(uint64_t k) {  // splitmix64 finalizer: both ids reach the low bits
    k = (k ^ (k >> 30)) * 0xBF58476D1CE4E5B9ull;
    k = (k ^ (k >> 27)) * 0x94D049BB133111EBull;
    return static_cast<size_t>(k ^ (k >> 31));
  }
  std::vector<uint64_t> entries_;
  size_t mask_ = 0, size_ = 0;
};

struct BpeOptions {
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::string unk_token;          // empty: characters outside the vocabulary are dropped
  size_t cache_capacity = 10000;  // words remembered (0 disables the cache)
};

class BpeModel {
 public:
  // Builds the model from model.* of a parsed tokenizer.json. `model_json` is file.config["model"].
  static std::unique_ptr<BpeModel> build(const TokenizerFile& file, const nlohmann::json& model_json,
                                         const JsonPath& at);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }
  // Empty view for ids the vocabulary does not define.
  std::string_view id_to_token(int32_t id) const;
  // One past the largest id of the vocabulary.
  size_t vocab_size() const { return id_tokens_.size(); }
  size_t merge_count() const { return merges_.size(); }

  void set_cache_capacity(size_t words);

 private:
  BpeModel() = default;
  void encode_uncached(std::string_view word, std::vector<int32_t>& out) const;
  int32_t char_id(std::string_view ch) const;

  BpeOptions options_;
  TokenStringMap vocab_;
  std::string id_strings_;  // token text by id
  std::vector<StringSpan> id_tokens_;
  std::vector<int32_t> bmp_ids_;  // single code points below U+10000 -> id (-1: not a token)
  int32_t byte_ids_[256];         // <0xNN> ids (-1: missing)
  int32_t unk_id_ = -1;
  MergeMap merges_;
  std::vector<int32_t> merged_by_rank_;  // rank -> id of the merged token

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace specula::text
