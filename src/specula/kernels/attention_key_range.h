#pragma once
// Attention of ONE query row over an explicit, contiguous range of key positions of a K/V store,
// with no causal or window mask: the drafter's kernel (docs/gemma4.md §7). The drafter's
// query position (RoPE) and its key set are decoupled — in the mlx-bun compatibility mode the
// query is rotated at offset-1+k while the keys stay the newest min(offset, W) committed ones — so
// the key range is passed explicitly instead of being derived from the query position.
//
// Numerics match kernels/attention.h: per head, scores in ascending key position, f32 softmax with
// its sum in that order, weighted V sum in the same order; heads are split across threads only.
#include <cstdint>

#include "specula/kernels/attention.h"
#include "specula/util/thread_pool.h"

namespace specula {

// q: [heads][kv.head_dim]; out: [heads][kv.head_dim]. Query head h reads KV head
// h / (heads / kv.kv_heads). Keys/values of positions [key_begin, key_end) must be present in kv.
// Throws if the range is empty or the heads cannot be grouped over the KV heads.
void attention_key_range(const float* q, int64_t heads, const KvStoreView& kv, int64_t key_begin, int64_t key_end,
                         float scale, float* out, ThreadPool& pool);

}  // namespace specula
