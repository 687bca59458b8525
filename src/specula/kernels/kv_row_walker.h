#pragma once
// Internal to the attention kernels (attention_avx2.cpp, attention_avx512.cpp). Everything here
// has internal linkage on purpose: each ISA-specific file compiles its own copy with its own
// instruction set, so no copy built for AVX-512 can be the one a baseline caller links to.
#include <cstdint>

#include "specula/kernels/attention.h"

namespace specula::detail {
namespace {

// KV head kvh's K or V rows of consecutive positions (KvStoreView::k_row / v_row without a
// division per key): the physical row advances by one, wrapping at the ring's end or moving to the
// next block. T: the store's element (float, or uint16_t for bf16).
template <typename T>
class RowWalker {
 public:
  RowWalker(const void* const* blocks, const KvStoreView& kv, int64_t pos, int64_t kvh)
      : blocks_(blocks), wrap_(kv.wrap), block_rows_(kv.block_rows), dim_(kv.head_dim), head_(kvh * kv.block_rows) {
    r_ = wrap_ > 0 ? pos % wrap_ : pos;
    b_ = r_ / block_rows_;
    o_ = r_ % block_rows_;
  }
  const T* row() const { return static_cast<const T*>(blocks_[b_]) + (head_ + o_) * dim_; }
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
  int64_t wrap_, block_rows_, dim_, head_;
  int64_t r_ = 0, b_ = 0, o_ = 0;
};

}  // namespace
}  // namespace specula::detail
