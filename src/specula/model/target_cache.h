#pragma once
// The KV state of one target-model sequence: a cache per KV donor layer (docs/gemma4.md §6), full
// layers growing, sliding layers as rings (kv_cache.h). KV-shared layers own nothing and read the
// cache of their donor (the last donor of the same type). All caches move together: one offset.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "specula/io/config.h"
#include "specula/model/kv_cache.h"

namespace specula {

struct CacheOptions {
  // Rollback guaranteed at any context length for up to this many positions (>= the largest
  // speculative gamma the caller will use).
  int64_t rollback_reserve = 16;
  // Largest number of positions one forward step writes (the prefill chunk). Rings are sized to
  // W + max(rollback_reserve, max_chunk - 1).
  int64_t max_chunk = 512;
  KvType kv_type = KvType::F32;  // element type of every cache's rows
};

// The caches at one offset, kept so that a later sequence sharing a prefix of at least
// `earliest` positions can go back to min(its prefix, offset) after the sliding-window rings have
// moved past it (kv_cache.h WindowCopy).
struct CacheSnapshot {
  int64_t offset = 0;                       // 0: no snapshot
  int64_t earliest = 0;                     // the smallest offset it can restore
  std::vector<KvCache::WindowCopy> caches;  // one per donor cache
  uint64_t bytes() const;
};

class TargetCache {
 public:
  TargetCache(const TargetConfig& config, const CacheOptions& options);

  int64_t offset() const { return offset_; }
  const CacheOptions& options() const { return options_; }
  // Positions a sliding-window ring holds beyond its window: how far past an offset the sequence
  // can move and still roll back to it.
  int64_t ring_extra() const { return std::max(options_.rollback_reserve, options_.max_chunk - 1); }

  // The cache layer `layer` reads (its own for donors, its donor's for sharers).
  KvCache& for_layer(int layer);
  const KvCache& for_layer(int layer) const;
  // Whether `layer` writes to its cache (donor) or only reads it (sharer).
  bool owns(int layer) const;

  // Forgets the newest n positions on every cache. Throws (changing nothing) if any cache cannot.
  void rollback(int64_t n);
  int64_t max_rollback() const;
  void reset();

  // A snapshot that can go back to any offset in the last `margin` positions before offset().
  CacheSnapshot snapshot(int64_t margin) const;
  // Bytes a snapshot at `positions` positions holds.
  uint64_t snapshot_bytes(int64_t positions, int64_t margin) const;
  // Whether any cache is a ring, i.e. whether a snapshot can reach further back than rollback.
  bool has_rings() const;
  // Goes back to offset `to`, in [snapshot.earliest, snapshot.offset] and <= offset(). The positions
  // before `to` must hold what they held when the snapshot was taken (the caller knows the tokens).
  void restore(const CacheSnapshot& snapshot, int64_t to);

  // Used by the forward pass after it has written `count` positions to every donor cache.
  void advance(int64_t count);

  uint64_t allocated_bytes() const;
  // Bytes allocated once `positions` positions are cached (kv_cache.h bytes_at).
  uint64_t bytes_at(int64_t positions) const;
  // Frees every cache's storage beyond its committed positions.
  void release_unused();

 private:
  CacheOptions options_;
  std::vector<KvCache> caches_;      // donors only
  std::vector<int> cache_of_layer_;  // index into caches_ for every layer
  std::vector<bool> owns_;
  int64_t offset_ = 0;
};

}  // namespace specula
