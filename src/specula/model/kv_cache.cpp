#include "specula/model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "specula/util/alignment.h"
#include "specula/util/error.h"

namespace specula {

namespace {
void check_type_fits(KvType type, int64_t head_dim) {
  if (!kv_type_fits(type, head_dim))
    fail("KV cache type {} needs head dims that are multiples of {}; this model has a layer of head dim {}",
         kv_type_name(type), kKvQ8Block, head_dim);
}
}  // namespace

KvCache KvCache::full(int64_t kv_heads, int64_t head_dim, int64_t block_positions, KvType type) {
  if (kv_heads <= 0 || head_dim <= 0 || block_positions < 0)
    fail("KV cache: invalid geometry ({} KV heads, head dim {}, block {})", kv_heads, head_dim, block_positions);
  check_type_fits(type, head_dim);
  KvCache c;
  c.kv_heads_ = kv_heads;
  c.head_dim_ = head_dim;
  c.type_ = type;
  // Positions that fill a huge page (the rest of it, less than a row, unused).
  c.block_positions_ = block_positions != kKvBlockOfOneHugePage
                           ? block_positions
                           : std::max<int64_t>(1, static_cast<int64_t>(kHugePage) / c.row_bytes());
  return c;
}

KvCache KvCache::ring(int64_t kv_heads, int64_t head_dim, int64_t window, int64_t extra, KvType type) {
  if (kv_heads <= 0 || head_dim <= 0) fail("KV cache: invalid geometry ({} KV heads, head dim {})", kv_heads, head_dim);
  check_type_fits(type, head_dim);
  if (window <= 0) fail("KV cache: sliding window {} must be positive", window);
  if (extra < 0) fail("KV cache: ring extra capacity {} must be >= 0", extra);
  KvCache c;
  c.kv_heads_ = kv_heads;
  c.head_dim_ = head_dim;
  c.window_ = window;
  c.capacity_ = window + extra;
  c.block_positions_ = c.capacity_;
  c.type_ = type;
  return c;
}

int64_t KvCache::max_write() const {
  // The first written query needs keys back to (its position - W + 1) while the last one is written.
  return is_ring() ? capacity_ - window_ + 1 : INT64_MAX;
}

void KvCache::reserve_write(int64_t count) {
  if (count <= 0) return;
  if (is_ring()) {
    if (count > max_write())
      fail(
          "KV cache: a forward of {} positions exceeds the sliding-window ring's limit of {} (window {} + "
          "extra {}); use a smaller chunk",
          count, max_write(), window_, capacity_ - window_);
    allocate_ring();
    // Writing positions up to offset+count-1 overwrites everything older than that minus capacity.
    oldest_ = std::max(oldest_, offset_ + count - capacity_);
    return;
  }
  const int64_t needed_blocks = (offset_ + count + block_positions_ - 1) / block_positions_;
  while (static_cast<int64_t>(k_blocks_.size()) < needed_blocks) {
    const auto n = static_cast<size_t>(block_positions_ * row_bytes());
    block_memory_.emplace_back(n, "a KV cache block");
    k_blocks_.push_back(block_memory_.back().data());
    block_memory_.emplace_back(n, "a KV cache block");
    v_blocks_.push_back(block_memory_.back().data());
  }
}

void KvCache::allocate_ring() {
  if (ring_memory_) return;
  const auto n = static_cast<size_t>(capacity_ * row_bytes());
  ring_memory_ = std::make_unique_for_overwrite<std::byte[]>(2 * n);
  k_blocks_.push_back(ring_memory_.get());
  v_blocks_.push_back(ring_memory_.get() + n);
}

std::byte* KvCache::slot(const std::vector<void*>& blocks, int64_t pos, int64_t kvh) const {
  const int64_t r = is_ring() ? pos % capacity_ : pos;
  return static_cast<std::byte*>(blocks[static_cast<size_t>(r / block_positions_)]) +
         (kvh * block_positions_ + r % block_positions_) * head_row_bytes();
}

void KvCache::gather(int64_t pos, std::byte* k, std::byte* v) const {
  const auto bytes = static_cast<size_t>(head_row_bytes());
  for (int64_t h = 0; h < kv_heads_; ++h) {
    std::memcpy(k + h * bytes, slot(k_blocks_, pos, h), bytes);
    std::memcpy(v + h * bytes, slot(v_blocks_, pos, h), bytes);
  }
}

void KvCache::scatter(int64_t pos, const std::byte* k, const std::byte* v) {
  const auto bytes = static_cast<size_t>(head_row_bytes());
  for (int64_t h = 0; h < kv_heads_; ++h) {
    std::memcpy(slot(k_blocks_, pos, h), k + h * bytes, bytes);
    std::memcpy(slot(v_blocks_, pos, h), v + h * bytes, bytes);
  }
}

void KvCache::store_row(const float* x, std::byte* out) const { kv_row_from_f32(type_, x, head_dim_, out); }

void KvCache::load_row(const std::byte* row, float* out) const { kv_row_to_f32(type_, row, head_dim_, out); }

void KvCache::write(int64_t pos, const float* k, const float* v) {
  for (int64_t h = 0; h < kv_heads_; ++h) {
    store_row(k + h * head_dim_, slot(k_blocks_, pos, h));
    store_row(v + h * head_dim_, slot(v_blocks_, pos, h));
  }
}

void KvCache::advance(int64_t count) { offset_ += count; }

int64_t KvCache::max_rollback() const {
  if (!is_ring()) return offset_;
  // After rolling back to o, the positions [max(0, o - W), o) must still be intact.
  if (oldest_ <= 0) return offset_;
  return std::max<int64_t>(0, offset_ - window_ - oldest_);
}

void KvCache::rollback(int64_t n) {
  if (n < 0) fail("KV cache: cannot roll back a negative count ({})", n);
  if (n > offset_) fail("KV cache: cannot roll back {} positions, only {} are cached", n, offset_);
  if (n > max_rollback())
    fail(
        "KV cache: cannot roll back {} positions at offset {}: the sliding-window ring (window {}, extra {}) "
        "keeps only {} positions of rollback history",
        n, offset_, window_, capacity_ - window_, max_rollback());
  offset_ -= n;
}

void KvCache::reset() {
  offset_ = 0;
  oldest_ = 0;
}

KvCache::WindowCopy KvCache::copy_window(int64_t margin) const {
  WindowCopy copy;
  copy.offset = offset_;
  copy.begin = offset_;
  if (!is_ring()) return copy;
  copy.begin = std::max({int64_t{0}, oldest_, offset_ - window_ - std::max<int64_t>(margin, 0)});
  const auto row = static_cast<size_t>(row_bytes());
  copy.k.resize(static_cast<size_t>(offset_ - copy.begin) * row);
  copy.v.resize(copy.k.size());
  for (int64_t pos = copy.begin; pos < offset_; ++pos) {
    const auto at = static_cast<size_t>(pos - copy.begin) * row;
    gather(pos, copy.k.data() + at, copy.v.data() + at);
  }
  return copy;
}

uint64_t KvCache::window_copy_bytes(int64_t positions, int64_t margin) const {
  if (!is_ring() || positions <= 0) return 0;
  const int64_t rows = std::min(positions, window_ + std::max<int64_t>(margin, 0));
  return static_cast<uint64_t>(2 * rows) * static_cast<uint64_t>(row_bytes());
}

bool KvCache::can_restore(const WindowCopy& copy, int64_t to) const {
  if (copy.offset < 0 || copy.offset > offset_ || to < 0 || to > copy.offset) return false;
  if (!is_ring()) return copy.k.empty() && copy.v.empty();
  if (copy.begin < 0 || copy.begin > copy.offset || to < copy.earliest(window_)) return false;
  const auto rows = static_cast<size_t>(copy.offset - copy.begin);
  return copy.k.size() == rows * static_cast<size_t>(row_bytes()) && copy.v.size() == copy.k.size();
}

void KvCache::restore_window(const WindowCopy& copy, int64_t to) {
  if (!can_restore(copy, to))
    fail("KV cache: a window copy of positions [{}, {}) cannot take this cache (offset {}, window {}) back to {}",
         copy.begin, copy.offset, offset_, window_, to);
  if (!is_ring()) return rollback(offset_ - to);
  const auto row = static_cast<size_t>(row_bytes());
  allocate_ring();
  for (int64_t pos = copy.begin; pos < to; ++pos) {
    const auto at = static_cast<size_t>(pos - copy.begin) * row;
    scatter(pos, copy.k.data() + at, copy.v.data() + at);
  }
  offset_ = to;
  // Only the copied positions are known intact: no rollback below their window.
  oldest_ = copy.begin;
}

int64_t KvCache::view_begin() const { return is_ring() ? std::max<int64_t>(0, offset_ - window_) : 0; }

void KvCache::check_readable(int64_t pos) const {
  if (pos < oldest_ || pos >= offset_)
    fail("KV cache: position {} is not readable (retained positions are [{}, {}))", pos, oldest_, offset_);
}

void KvCache::read_stored(int64_t pos, std::byte* k, std::byte* v) const {
  check_readable(pos);
  gather(pos, k, v);
}

void KvCache::read(int64_t pos, float* k, float* v) const {
  check_readable(pos);
  for (int64_t h = 0; h < kv_heads_; ++h) {
    load_row(slot(k_blocks_, pos, h), k + h * head_dim_);
    load_row(slot(v_blocks_, pos, h), v + h * head_dim_);
  }
}

KvStoreView KvCache::view() const {
  KvStoreView v;
  v.k_blocks = k_blocks_.data();
  v.v_blocks = v_blocks_.data();
  v.block_rows = block_positions_;
  v.wrap = capacity_;
  v.kv_heads = kv_heads_;
  v.head_dim = head_dim_;
  v.type = type_;
  return v;
}

uint64_t KvCache::bytes_at(int64_t positions) const {
  if (positions <= 0) return 0;
  const int64_t blocks = is_ring() ? 1 : (positions + block_positions_ - 1) / block_positions_;
  return static_cast<uint64_t>(2 * blocks) * static_cast<uint64_t>(block_positions_) *
         static_cast<uint64_t>(row_bytes());
}

void KvCache::release_unused() {
  const auto keep_blocks =
      static_cast<size_t>(offset_ == 0 ? 0 : (is_ring() ? 1 : (offset_ + block_positions_ - 1) / block_positions_));
  if (k_blocks_.size() <= keep_blocks) return;
  k_blocks_.resize(keep_blocks);
  v_blocks_.resize(keep_blocks);
  if (is_ring()) {
    ring_memory_.reset();
  } else {
    block_memory_.resize(2 * keep_blocks);
  }
}

uint64_t KvCache::allocated_bytes() const {
  return static_cast<uint64_t>(k_blocks_.size() + v_blocks_.size()) * static_cast<uint64_t>(block_positions_) *
         static_cast<uint64_t>(row_bytes());
}

}  // namespace specula
