#pragma once
// One layer's K/V store, addressed by absolute position (docs/gemma4.md §6).
//  * Full-attention layers: storage grows in blocks of positions; nothing is ever copied.
//  * Sliding-window layers: a ring of capacity W + extra (extra >= the rollback reserve and >= the
//    largest forward chunk - 1), position p living in row p % capacity. Because every position
//    keeps its identity, rollback is a change of `offset` only and stays valid at any context
//    length for up to `extra` positions, and the newest min(offset, W) keys can be read in
//    chronological order without copying (the drafter's view).
// Rows are stored after k_norm + RoPE (K) and v_norm (V), as f32, bf16 or q8 (kv_type.h: rounded
// or quantized once, when the row is written). A storage block keeps each KV head's rows together
// ([kv_head][position][head_dim], KvStoreView): one head's attention reads contiguous memory.
// Storage is left uninitialized (zeroing the ~100 MB of an E4B cache cost ~200 ms of the first
// forward): every reader reads only positions written since the last reset.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "specula/kernels/attention.h"
#include "specula/kernels/kv_type.h"
#include "specula/util/huge_page_buffer.h"

namespace specula {

// A full-attention layer's cache sizes its storage blocks to one huge page by default
// (util/huge_page_buffer.h): a long context's K and V are then read with one TLB entry per 2 MiB.
inline constexpr int64_t kKvBlockOfOneHugePage = 0;

class KvCache {
 public:
  // A growing cache for a full-attention layer, in blocks of `block_positions` positions (by
  // default as many as fill a huge page).
  static KvCache full(int64_t kv_heads, int64_t head_dim, int64_t block_positions = kKvBlockOfOneHugePage,
                      KvType type = KvType::F32);
  // A ring for a sliding-window layer of window `window`, holding window + extra positions.
  static KvCache ring(int64_t kv_heads, int64_t head_dim, int64_t window, int64_t extra, KvType type = KvType::F32);

  bool is_ring() const { return capacity_ > 0; }
  int64_t window() const { return window_; }      // 0 for full caches
  int64_t capacity() const { return capacity_; }  // ring positions; 0 for full caches
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  KvType type() const { return type_; }
  int64_t row_elements() const { return kv_heads_ * head_dim_; }
  int64_t row_bytes() const { return kv_heads_ * head_row_bytes(); }

  // Number of positions committed: keys [0, offset) have been written (the ring keeps the newest).
  int64_t offset() const { return offset_; }

  // Largest number of positions one forward may write at once (the ring must keep the window of
  // the first of them while the last is written).
  int64_t max_write() const;

  // Prepares storage for positions [offset, offset + count); rows are then filled through
  // write(), read by attention through view(), and committed by advance().
  void reserve_write(int64_t count);
  // Stores the K and V rows (row_elements() floats each) of position pos, rounded to type().
  void write(int64_t pos, const float* k, const float* v);
  void advance(int64_t count);

  // Forgets the newest n positions. Throws if n > offset, or if the ring has already overwritten
  // keys that the new offset's window (the last min(offset - n, W) positions) needs.
  void rollback(int64_t n);
  // Largest n rollback() accepts right now.
  int64_t max_rollback() const;
  void reset();

  // A ring's newest positions, copied: what going back to an offset near the copy's needs once
  // the ring has moved on and overwritten them (a chat's next prompt diverges near the end of the
  // previous one). Copying W + margin positions (as many as the ring still holds) allows going
  // back to any offset in [begin + W, offset] (to any offset up to `offset` when begin is 0).
  // Full caches overwrite nothing and need no copy.
  struct WindowCopy {
    int64_t begin = 0, offset = 0;
    std::vector<std::byte> k, v;  // stored rows of positions [begin, offset), oldest first
    int64_t earliest(int64_t window) const { return begin == 0 ? 0 : begin + window; }
  };
  WindowCopy copy_window(int64_t margin) const;
  // Bytes copy_window(margin) holds at `positions` positions (0 for full caches).
  uint64_t window_copy_bytes(int64_t positions, int64_t margin) const;
  // Goes back to offset `to` (<= offset(), within what the copy allows): a ring gets the copied rows
  // back, a full cache rolls back. The positions before `to` must hold what they held when the copy
  // was taken.
  void restore_window(const WindowCopy& copy, int64_t to);
  // Whether restore_window(copy, to) would succeed.
  bool can_restore(const WindowCopy& copy, int64_t to) const;

  // The drafter's chronological view: positions [view_begin(), offset()), i.e. the newest
  // min(offset, W) keys on ring caches and all keys on full caches.
  int64_t view_begin() const;
  // The stored K and V rows of a committed position inside [oldest retained, offset), all KV heads
  // in order ([kv_head][head_dim], row_bytes() each); throws outside.
  void read_stored(int64_t pos, std::byte* k, std::byte* v) const;
  // The same rows as f32 (row_elements() floats each; bf16 widened exactly).
  void read(int64_t pos, float* k, float* v) const;

  // The store as the attention kernel reads it (valid until the next reserve_write).
  KvStoreView view() const;

  // Bytes currently allocated for K and V.
  uint64_t allocated_bytes() const;
  // Bytes allocated once `positions` positions have been written (rings: their whole capacity).
  uint64_t bytes_at(int64_t positions) const;
  // Frees the storage beyond the committed positions (full caches; rings keep theirs while they
  // hold any): what an idle cache gives back under memory pressure.
  void release_unused();

 private:
  KvCache() = default;
  // KV head kvh's row of position pos.
  std::byte* slot(const std::vector<void*>& blocks, int64_t pos, int64_t kvh) const;
  int64_t head_row_bytes() const { return kv_head_row_bytes(type_, head_dim_); }
  // One head's row of floats as stored (rounded or quantized), and back to floats.
  void store_row(const float* x, std::byte* out) const;
  void load_row(const std::byte* row, float* out) const;
  // Copies the K and V rows of every head of `pos` from / to [kv_head][head_dim] rows.
  void gather(int64_t pos, std::byte* k, std::byte* v) const;
  void scatter(int64_t pos, const std::byte* k, const std::byte* v);
  void allocate_ring();
  void check_readable(int64_t pos) const;

  int64_t kv_heads_ = 0;
  int64_t head_dim_ = 0;
  KvType type_ = KvType::F32;
  int64_t window_ = 0;
  int64_t capacity_ = 0;         // ring only
  int64_t block_positions_ = 0;  // positions per block
  int64_t offset_ = 0;
  int64_t oldest_ = 0;                        // oldest position whose rows are still intact (ring overwrites)
  std::vector<HugePageBuffer> block_memory_;  // full caches: the K and V block of each index, side by side
  std::unique_ptr<std::byte[]> ring_memory_;  // rings: K then V, capacity positions each
  std::vector<void*> k_blocks_;               // void*: what KvStoreView points at
  std::vector<void*> v_blocks_;
};

}  // namespace specula
