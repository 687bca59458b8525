#pragma once
// One decoder layer's attention block, the code of the target's layers and of the drafter's
// (docs/gemma4.md §5.3, §7):
//   x += post_norm(o_proj(attention(rope(q_norm(q_proj(input_norm(x)))), cache)))
// A layer with K/V projections first writes its rows' keys (k_norm + RoPE) and values (scale-free
// v_norm) to its own cache. A layer without them is Q-only: it reads a cache another layer wrote
// (the target's KV-sharing layers, every drafter layer over the target's caches).
#include <cstdint>
#include <span>
#include <vector>

#include "specula/kernels/rope.h"
#include "specula/kernels/weight_matrix.h"
#include "specula/model/kv_cache.h"
#include "specula/model/layer_ops.h"

namespace specula {

// A view of one layer's attention weights.
struct AttentionWeights {
  const float* input_norm = nullptr;
  const WeightMatrix* q_proj = nullptr;
  const float* q_norm = nullptr;
  const WeightMatrix* k_proj = nullptr;  // null: Q-only
  const WeightMatrix* v_proj = nullptr;  // null with k_eq_v (V is the raw k_proj output)
  const float* k_norm = nullptr;
  const WeightMatrix* qkv = nullptr;  // q | k (| v) packed as one matrix for the fast kernels, or null
  const WeightMatrix* o_proj = nullptr;
  const float* post_norm = nullptr;
  const RopeFrequencies* rope = nullptr;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t kv_heads = 0;  // of the K/V projections
  float scale = 1.0f;
  float eps = 1e-6f;
};

// The rows [first_row, first_row + rows) of one sequence and that sequence's cache for the layer.
// Row r is a query at key position `position + r`: its causal mask and the cache's window follow
// from it, and a layer with K/V projections writes the row's key and value there.
struct AttentionRows {
  const KvCache* cache = nullptr;
  KvCache* written = nullptr;  // the same cache, writable: needed by a layer with K/V projections
  int64_t first_row = 0;
  int64_t rows = 0;
  int64_t position = 0;
};

// The block's activations ([rows][width] each), grown and reused.
struct AttentionBuffers {
  std::vector<float> normed, q, k, v, qkv, attn, branch;
};

// Runs the block over the n rows of x ([n][hidden], updated in place). rope_cos / rope_sin: the
// rows' RoPE tables ([n][rope.rotated_pairs()]), for the queries' own positions, which the drafter
// sets apart from their key positions. Every row's bytes depend on that row and its sequence's
// cache alone.
void attention_block(const AttentionWeights& w, std::span<const AttentionRows> sequences, int64_t n,
                     const float* rope_cos, const float* rope_sin, float* x, int64_t hidden, AttentionBuffers& buf,
                     const Linear& linear);

}  // namespace specula
