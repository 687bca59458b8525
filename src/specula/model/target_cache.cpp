#include "specula/model/target_cache.h"

#include <algorithm>

#include "specula/util/error.h"

namespace specula {

TargetCache::TargetCache(const TargetConfig& config, const CacheOptions& options) : options_(options) {
  if (options.rollback_reserve < 0) fail("rollback reserve {} must be >= 0", options.rollback_reserve);
  if (options.max_chunk < 1) fail("prefill chunk {} must be >= 1", options.max_chunk);
  const int64_t extra = ring_extra();
  const auto n = config.layers.size();
  cache_of_layer_.assign(n, -1);
  owns_.assign(n, false);
  std::vector<int> cache_of_donor(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const LayerGeometry& g = config.layers[i];
    if (!g.kv_donor) continue;
    if (g.type == LayerType::Sliding) {
      caches_.push_back(KvCache::ring(g.num_kv_heads, g.head_dim, config.text.sliding_window, extra, options.kv_type));
    } else {
      caches_.push_back(KvCache::full(g.num_kv_heads, g.head_dim, kKvBlockOfOneHugePage, options.kv_type));
    }
    cache_of_donor[i] = static_cast<int>(caches_.size()) - 1;
    cache_of_layer_[i] = cache_of_donor[i];
    owns_[i] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    const LayerGeometry& g = config.layers[i];
    if (g.kv_donor) continue;
    const int src = g.kv_source;
    if (src < 0 || static_cast<size_t>(src) >= n || cache_of_donor[static_cast<size_t>(src)] < 0)
      fail("{}: layer {} shares the KV cache of layer {}, which is not a KV donor", config.source, i, src);
    cache_of_layer_[i] = cache_of_donor[static_cast<size_t>(src)];
  }
}

KvCache& TargetCache::for_layer(int layer) {
  return caches_.at(static_cast<size_t>(cache_of_layer_.at(static_cast<size_t>(layer))));
}
const KvCache& TargetCache::for_layer(int layer) const {
  return caches_.at(static_cast<size_t>(cache_of_layer_.at(static_cast<size_t>(layer))));
}
bool TargetCache::owns(int layer) const { return owns_.at(static_cast<size_t>(layer)); }

int64_t TargetCache::max_rollback() const {
  int64_t m = offset_;
  for (const KvCache& c : caches_) m = std::min(m, c.max_rollback());
  return m;
}

void TargetCache::rollback(int64_t n) {
  if (n < 0) fail("cannot roll back a negative count ({})", n);
  if (n > offset_) fail("cannot roll back {} positions, only {} are cached", n, offset_);
  const int64_t limit = max_rollback();
  if (n > limit)
    fail(
        "cannot roll back {} positions at offset {}: the sliding-window caches keep {} positions of rollback "
        "history (rollback reserve {})",
        n, offset_, limit, options_.rollback_reserve);
  for (KvCache& c : caches_) c.rollback(n);
  offset_ -= n;
}

void TargetCache::reset() {
  for (KvCache& c : caches_) c.reset();
  offset_ = 0;
}

uint64_t CacheSnapshot::bytes() const {
  uint64_t b = 0;
  for (const KvCache::WindowCopy& c : caches) b += c.k.size() + c.v.size();
  return b;
}

CacheSnapshot TargetCache::snapshot(int64_t margin) const {
  CacheSnapshot s;
  s.offset = offset_;
  s.caches.reserve(caches_.size());
  for (const KvCache& c : caches_) {
    s.caches.push_back(c.copy_window(margin));
    s.earliest = std::max(s.earliest, c.is_ring() ? s.caches.back().earliest(c.window()) : 0);
  }
  return s;
}

uint64_t TargetCache::snapshot_bytes(int64_t positions, int64_t margin) const {
  uint64_t b = 0;
  for (const KvCache& c : caches_) b += c.window_copy_bytes(positions, margin);
  return b;
}

bool TargetCache::has_rings() const {
  return std::any_of(caches_.begin(), caches_.end(), [](const KvCache& c) { return c.is_ring(); });
}

void TargetCache::restore(const CacheSnapshot& snapshot, int64_t to) {
  if (snapshot.caches.size() != caches_.size())
    fail("a snapshot of {} caches does not fit a sequence of {}", snapshot.caches.size(), caches_.size());
  for (size_t i = 0; i < caches_.size(); ++i)
    if (snapshot.caches[i].offset != snapshot.offset || !caches_[i].can_restore(snapshot.caches[i], to))
      fail("cannot go back to offset {} with a snapshot of offsets [{}, {}] (cache {}, {} positions cached)", to,
           snapshot.earliest, snapshot.offset, i, offset_);
  for (size_t i = 0; i < caches_.size(); ++i) caches_[i].restore_window(snapshot.caches[i], to);
  offset_ = to;
}

void TargetCache::advance(int64_t count) {
  for (KvCache& c : caches_) c.advance(count);
  offset_ += count;
}

uint64_t TargetCache::bytes_at(int64_t positions) const {
  uint64_t b = 0;
  for (const KvCache& c : caches_) b += c.bytes_at(positions);
  return b;
}

void TargetCache::release_unused() {
  for (KvCache& c : caches_) c.release_unused();
}

uint64_t TargetCache::allocated_bytes() const {
  uint64_t b = 0;
  for (const KvCache& c : caches_) b += c.allocated_bytes();
  return b;
}

}  // namespace specula
