#pragma once
// Scaled dot-product attention of query rows over a K/V store addressed by ABSOLUTE position
// (docs/gemma4.md §5.3, §6; docs/architecture.md §3). Gemma 4: scale 1.0, GQA (query head h reads
// KV head h / (heads / kv_heads)), causal, and on sliding layers a window: the query at position p
// sees keys p-W+1 .. p.
//
// Every (query row, head) is computed alone: scores in ascending key position, the softmax with its
// sum in a fixed order (softmax_numerators), and the weighted V sum in ascending key position. The
// visible key set is a function of the query position only, so a row's bytes are identical whether
// its keys were written by a prefill chunk of any size or by single-token decode steps, and for
// any thread count.
#include <cmath>
#include <cstdint>
#include <vector>

#include "specula/kernels/kv_type.h"
#include "specula/util/thread_pool.h"

namespace specula {

// Where the K and V rows of absolute position p live. Position p maps to physical row
// r = (wrap > 0 ? p % wrap : p) of block r / block_rows. A block holds block_rows rows of each KV
// head, one head after the other ([kv_head][row][head_dim] elements of `type`, kv_type.h): the
// rows one KV head's attention reads are one contiguous stream per block, which the hardware
// prefetchers follow.
struct KvStoreView {
  const void* const* k_blocks = nullptr;
  const void* const* v_blocks = nullptr;
  int64_t block_rows = 0;
  int64_t wrap = 0;  // ring capacity; 0 = linear storage
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  KvType type = KvType::F32;

  int64_t head_row_bytes() const { return kv_head_row_bytes(type, head_dim); }
  // KV head kvh's stored K (V) row of position pos: head_dim elements of `type`.
  const void* k_row(int64_t pos, int64_t kvh) const { return locate(k_blocks, pos, kvh); }
  const void* v_row(int64_t pos, int64_t kvh) const { return locate(v_blocks, pos, kvh); }
  // The same rows as head_dim floats: a pointer into the store for f32, `buf` holding the values
  // exactly widened (bf16) or dequantized (q8) otherwise.
  const float* k_head(int64_t pos, int64_t kvh, float* buf) const { return widen(k_row(pos, kvh), buf); }
  const float* v_head(int64_t pos, int64_t kvh, float* buf) const { return widen(v_row(pos, kvh), buf); }

 private:
  const void* locate(const void* const* blocks, int64_t pos, int64_t kvh) const {
    const int64_t r = wrap > 0 ? pos % wrap : pos;
    return static_cast<const char*>(blocks[r / block_rows]) + (kvh * block_rows + r % block_rows) * head_row_bytes();
  }
  const float* widen(const void* row, float* buf) const {
    if (type == KvType::F32) return static_cast<const float*>(row);
    kv_row_to_f32(type, row, head_dim, buf);
    return buf;
  }
};

struct AttentionParams {
  int64_t heads = 0;  // query heads; a multiple of kv.kv_heads
  float scale = 1.0f;
  int64_t window = 0;  // sliding window W (0 = full causal attention)
};

// q: rows x [heads][head_dim] (row stride ld_q); out: rows x [heads][head_dim] (row stride ld_out).
// Query row r sits at absolute position first_position + r. Every key position the rows can see
// must be present in `kv`. Parallel over (row, KV head, slice of its query heads).
void attention(const float* q, int64_t rows, int64_t ld_q, int64_t first_position, const KvStoreView& kv,
               const AttentionParams& params, float* out, int64_t ld_out, ThreadPool& pool);

// q . k with 16 partial sums (element j into sum j % 16, each step one fused multiply-add) and a
// fixed pairwise reduction: the same order for every row, batch and thread count, and independent
// chains the vector kernels run side by side (one running sum would be a chain of d dependent
// additions per key).
[[gnu::always_inline]] inline float attention_dot(const float* q, const float* k, int64_t d) {
  constexpr int kLanes = 16;
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= d; j += kLanes) {
    for (int i = 0; i < kLanes; ++i) part[i] = std::fma(q[j + i], k[j + i], part[i]);
  }
  for (int i = 0; j < d; ++i, ++j) part[i] = std::fma(q[j], k[j], part[i]);
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) part[i] += part[i + width];
  }
  return part[0];
}

// One query head's attention: q (head_dim floats) over the keys [first_key, first_key + n) of one
// KV head, unmasked, written to out (head_dim floats).
struct HeadTask {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t first_key = 0;
  int64_t n = 0;  // >= 1
};

// Scratch of attend_heads(): scores count x (union key span) floats, acc count x head_dim floats,
// rows: where bf16 or q8 K and V rows are turned into floats (kAttentionRowSlots rows).
inline constexpr int64_t kAttentionRowSlots = 16;
struct AttentionScratch {
  std::vector<float> scores, acc, rows;
};

// Runs `count` tasks that all read KV head `kvh`. Per task: scores in ascending key position
// (attention_dot, times `scale`), the softmax numerators and their sum (softmax_numerators), the
// weighted V sum in ascending key order (one fused multiply-add per key and element), out = that
// sum times 1 / the softmax sum. With AVX2 and AVX-512 the tasks share every K and V
// row while it is in L1 (the query heads of a GQA group, and the rows of a verify or prefill chunk,
// read the KV head once between them, not once each); every task's arithmetic is the same as
// alone, so how tasks are grouped changes no bit. The kernel of attention().
void attend_heads(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, float scale,
                  AttentionScratch& scratch);

// How attention() splits (query row, KV head, query head) work into
// items for the pool: `rows` consecutive query rows times `heads` query heads of one KV head.
struct AttentionWorkSplit {
  int64_t rows = 1;
  int64_t heads = 1;
};
// Whole GQA groups and as many rows per item (at most 8) as keep every thread busy; groups split
// into ceil(group / heads) parts only when rows x KV heads are fewer than the threads.
AttentionWorkSplit attention_work_split(int64_t rows, int64_t kv_heads, int64_t group, int threads);

// A task's softmax numerators in place, scores[t] = softmax_exp(scores[t] - max) (softmax_exp.h),
// and their sum: key t into partial sum t % 16, folded as attention_dot folds. The portable loops;
// the AVX-512 kernels compute the same bytes.
float softmax_numerators(float* scores, int64_t n);

// The first key position visible from a query at `position` (window 0 = no window).
inline int64_t attention_first_key(int64_t position, int64_t window) {
  if (window <= 0) return 0;
  const int64_t lo = position - window + 1;
  return lo > 0 ? lo : 0;
}

}  // namespace specula
