#include "specula/model/attention_block.h"

#include <cstring>

#include "specula/kernels/attention.h"
#include "specula/util/error.h"

namespace specula {
namespace {

// q (and k, v with K/V projections) of every row, from one fused matmul when there is one.
void project(const AttentionWeights& w, int64_t n, AttentionBuffers& buf, const Linear& layer_linear) {
  const Linear linear = layer_linear.attention_inputs();
  const int64_t qw = w.heads * w.head_dim;
  const int64_t kvw = w.kv_heads * w.head_dim;
  const bool k_eq_v = w.v_proj == nullptr;
  ensure(buf.q, n * qw);
  if (w.k_proj != nullptr) {
    ensure(buf.k, n * kvw);
    ensure(buf.v, n * kvw);
  }
  if (w.qkv != nullptr) {  // row r of the fused output: [q | k | v]
    const int64_t width = w.qkv->rows;
    ensure(buf.qkv, n * width);
    linear(buf.normed.data(), n, *w.qkv, buf.qkv.data());
    for (int64_t r = 0; r < n; ++r) {
      const float* row = buf.qkv.data() + r * width;
      std::memcpy(buf.q.data() + r * qw, row, sizeof(float) * qw);
      std::memcpy(buf.k.data() + r * kvw, row + qw, sizeof(float) * kvw);
      if (!k_eq_v) std::memcpy(buf.v.data() + r * kvw, row + qw + kvw, sizeof(float) * kvw);
    }
  } else {
    linear(buf.normed.data(), n, *w.q_proj, buf.q.data());
    if (w.k_proj != nullptr) linear(buf.normed.data(), n, *w.k_proj, buf.k.data());
    if (w.k_proj != nullptr && !k_eq_v) linear(buf.normed.data(), n, *w.v_proj, buf.v.data());
  }
  if (w.k_proj != nullptr && k_eq_v) std::memcpy(buf.v.data(), buf.k.data(), sizeof(float) * n * kvw);
}

// Every sequence's rows' K and V into its cache, at the rows' key positions.
void write_keys_values(std::span<const AttentionRows> sequences, int64_t kvw, const AttentionBuffers& buf) {
  for (const AttentionRows& s : sequences) {
    if (s.written == nullptr) fail("attention: a layer with K/V projections needs a writable cache");
    KvCache& kv = *s.written;
    kv.reserve_write(s.rows);
    for (int64_t r = 0; r < s.rows; ++r) {
      const int64_t row = s.first_row + r;
      kv.write(s.position + r, buf.k.data() + row * kvw, buf.v.data() + row * kvw);
    }
  }
}

}  // namespace

void attention_block(const AttentionWeights& w, std::span<const AttentionRows> sequences, int64_t n,
                     const float* rope_cos, const float* rope_sin, float* x, int64_t hidden, AttentionBuffers& buf,
                     const Linear& linear) {
  ThreadPool& pool = linear.pool;
  const int64_t D = w.head_dim;
  const int64_t qw = w.heads * D;
  ensure(buf.normed, n * hidden);
  rms_norm_rows(pool, x, n, hidden, w.input_norm, w.eps, buf.normed.data());
  project(w, n, buf, linear);
  norm_and_rotate_heads(pool, buf.q.data(), n, w.heads, D, w.q_norm, w.eps, *w.rope, rope_cos, rope_sin);
  if (w.k_proj != nullptr) {
    norm_and_rotate_heads(pool, buf.k.data(), n, w.kv_heads, D, w.k_norm, w.eps, *w.rope, rope_cos, rope_sin);
    rms_norm_rows(pool, buf.v.data(), n * w.kv_heads, D, nullptr, w.eps, buf.v.data());  // never rotated
    write_keys_values(sequences, w.kv_heads * D, buf);
  }

  ensure(buf.attn, n * qw);
  for (const AttentionRows& s : sequences) {
    AttentionParams params;
    params.heads = w.heads;
    params.scale = w.scale;
    params.window = s.cache->window();
    attention(buf.q.data() + s.first_row * qw, s.rows, qw, s.position, s.cache->view(), params,
              buf.attn.data() + s.first_row * qw, qw, pool);
  }
  ensure(buf.branch, n * hidden);
  linear(buf.attn.data(), n, *w.o_proj, buf.branch.data());
  add_normed_branch(pool, x, buf.branch.data(), n, hidden, w.post_norm, w.eps);
}

}  // namespace specula
