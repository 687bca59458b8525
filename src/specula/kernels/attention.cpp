#include "specula/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "specula/util/error.h"

namespace specula {

// Baseline x86-64 code (no FMA contraction possible), so its bytes are the same on every CPU.
void attend_one_head(const float* q, const KvStoreView& kv, int64_t kvh, int64_t first_key, int64_t n, float scale,
                     float* scores, float* acc, float* out) {
  const int64_t d = kv.head_dim;
  float m = -INFINITY;
  for (int64_t t = 0; t < n; ++t) {
    const float s = attention_dot(q, kv.k_row(first_key + t) + kvh * d, d) * scale;
    scores[t] = s;
    m = std::max(m, s);
  }
  float sum = 0.0f;
  for (int64_t t = 0; t < n; ++t) {
    scores[t] = std::exp(scores[t] - m);
    sum += scores[t];
  }
  std::fill(acc, acc + d, 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    const float* vr = kv.v_row(first_key + t) + kvh * d;
    const float w = scores[t];
    for (int64_t j = 0; j < d; ++j) acc[j] += w * vr[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < d; ++j) out[j] = acc[j] * inv;
}

void attention(const float* q, int64_t rows, int64_t ld_q, int64_t first_position, const KvStoreView& kv,
               const AttentionParams& params, float* out, int64_t ld_out, ThreadPool& pool) {
  if (rows <= 0) return;
  const int64_t heads = params.heads;
  const int64_t kv_heads = kv.kv_heads;
  const int64_t d = kv.head_dim;
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    fail("attention: {} query heads cannot be grouped over {} KV heads", heads, kv_heads);
  const int64_t group = heads / kv_heads;
  const int64_t max_keys = params.window > 0 ? std::min(params.window, first_position + rows)
                                             : first_position + rows;

  pool.parallel_for(rows * heads, 1, [&](int, int64_t begin, int64_t end) {
    std::vector<float> weights(static_cast<size_t>(max_keys));
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / heads;
      const int64_t h = item % heads;
      const int64_t kvh = h / group;
      const int64_t pos = first_position + r;
      const int64_t lo = attention_first_key(pos, params.window);
      const int64_t n = pos - lo + 1;
      attend_one_head(q + r * ld_q + h * d, kv, kvh, lo, n, params.scale, weights.data(), acc.data(),
                      out + r * ld_out + h * d);
    }
  });
}

}  // namespace specula
