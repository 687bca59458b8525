#include "specula/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "specula/util/error.h"

namespace specula {

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
      const float* qv = q + r * ld_q + h * d;

      float m = -INFINITY;
      for (int64_t t = 0; t < n; ++t) {
        const float s = attention_dot(qv, kv.k_row(lo + t) + kvh * d, d) * params.scale;
        weights[t] = s;
        m = std::max(m, s);
      }
      float sum = 0.0f;
      for (int64_t t = 0; t < n; ++t) {
        weights[t] = std::exp(weights[t] - m);
        sum += weights[t];
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t t = 0; t < n; ++t) {
        const float* vr = kv.v_row(lo + t) + kvh * d;
        const float w = weights[t];
        for (int64_t j = 0; j < d; ++j) acc[j] += w * vr[j];
      }
      const float inv = 1.0f / sum;
      float* o = out + r * ld_out + h * d;
      for (int64_t j = 0; j < d; ++j) o[j] = acc[j] * inv;
    }
  });
}

}  // namespace specula
