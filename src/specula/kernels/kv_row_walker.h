#pragma once
// Internal to the attention kernels (attention_avx2.cpp, attention_avx512.cpp). Everything here
// has internal linkage on purpose: each ISA-specific file compiles its own copy with its own
// instruction set, so no copy built for AVX-512 can be the one a baseline caller links to.
#include <bit>
#include <cstdint>

#include "specula/kernels/attention.h"

namespace specula::detail {
namespace {

// KV head kvh's stored K or V rows of consecutive positions (KvStoreView::k_row / v_row without
// a division per key): the physical row advances by one, wrapping at the ring's end or moving to
// the next block.
class RowWalker {
 public:
  RowWalker(const void* const* blocks, const KvStoreView& kv, int64_t pos, int64_t kvh)
      : blocks_(blocks),
        wrap_(kv.wrap),
        block_rows_(kv.block_rows),
        stride_(kv.head_row_bytes()),
        head_(kvh * kv.block_rows) {
    r_ = wrap_ > 0 ? pos % wrap_ : pos;
    b_ = r_ / block_rows_;
    o_ = r_ % block_rows_;
  }
  const char* row() const { return static_cast<const char*>(blocks_[b_]) + (head_ + o_) * stride_; }
  void next() {
    ++r_;
    ++o_;
    if (wrap_ > 0 && r_ == wrap_) {
      r_ = b_ = o_ = 0;
    } else if (o_ == block_rows_) {
      ++b_;
      o_ = 0;
    }
  }

 private:
  const void* const* blocks_;
  int64_t wrap_, block_rows_, stride_, head_;
  int64_t r_ = 0, b_ = 0, o_ = 0;
};

// The rows as a kernel reads them, one after the other: the stored elements in place (T = float
// for f32 stores, uint16_t for bf16, which the kernels widen as they load) ...
template <typename T>
class StoredRows {
 public:
  using Element = T;
  using Handle = const T*;
  StoredRows(const void* const* blocks, const KvStoreView& kv, int64_t pos, int64_t kvh, float* /*slots*/)
      : walk_(blocks, kv, pos, kvh) {}
  // The current row; `slot` is where a converted copy would go (unused here).
  const T* row(int /*slot*/) const { return reinterpret_cast<const T*>(walk_.row()); }
  void next() { walk_.next(); }

 private:
  RowWalker walk_;
};

// ... or, for q8 stores, each row dequantized into one of the caller's slots (kAttentionRowSlots
// rows of head_dim floats): code times scale, exact in f32 (kv_type.h).
class DequantizedRows {
 public:
  using Element = float;
  using Handle = const float*;
  DequantizedRows(const void* const* blocks, const KvStoreView& kv, int64_t pos, int64_t kvh, float* slots)
      : walk_(blocks, kv, pos, kvh), dim_(kv.head_dim), slots_(slots) {}
  const float* row(int slot) const {
    const auto* codes = reinterpret_cast<const int8_t*>(walk_.row());
    const auto* scales = reinterpret_cast<const uint16_t*>(walk_.row() + dim_);
    float* out = slots_ + slot * dim_;
    for (int64_t b = 0; b < dim_ / kKvQ8Block; ++b) {
      const float scale = std::bit_cast<float>(static_cast<uint32_t>(scales[b]) << 16);
      for (int64_t i = b * kKvQ8Block; i < (b + 1) * kKvQ8Block; ++i) out[i] = static_cast<float>(codes[i]) * scale;
    }
    return out;
  }
  void next() { walk_.next(); }

 private:
  RowWalker walk_;
  int64_t dim_;
  float* slots_;
};

}  // namespace
}  // namespace specula::detail
