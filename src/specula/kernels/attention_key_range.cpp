#include "specula/kernels/attention_key_range.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "specula/util/error.h"

namespace specula {

void attention_key_range(const float* q, int64_t heads, const KvStoreView& kv, int64_t key_begin, int64_t key_end,
                         float scale, float* out, ThreadPool& pool) {
  const int64_t kv_heads = kv.kv_heads;
  const int64_t d = kv.head_dim;
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    fail("attention_key_range: {} query heads cannot be grouped over {} KV heads", heads, kv_heads);
  if (key_begin < 0 || key_end <= key_begin)
    fail("attention_key_range: empty or invalid key range [{}, {})", key_begin, key_end);
  const int64_t group = heads / kv_heads;
  const int64_t n = key_end - key_begin;

  pool.parallel_for(heads, 1, [&](int, int64_t begin, int64_t end) {
    std::vector<float> weights(static_cast<size_t>(n));
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t h = begin; h < end; ++h) {
      const int64_t kvh = h / group;
      const float* qv = q + h * d;
      float m = -INFINITY;
      for (int64_t t = 0; t < n; ++t) {
        const float s = attention_dot(qv, kv.k_row(key_begin + t) + kvh * d, d) * scale;
        weights[static_cast<size_t>(t)] = s;
        m = std::max(m, s);
      }
      float sum = 0.0f;
      for (int64_t t = 0; t < n; ++t) {
        weights[static_cast<size_t>(t)] = std::exp(weights[static_cast<size_t>(t)] - m);
        sum += weights[static_cast<size_t>(t)];
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t t = 0; t < n; ++t) {
        const float* vr = kv.v_row(key_begin + t) + kvh * d;
        const float w = weights[static_cast<size_t>(t)];
        for (int64_t j = 0; j < d; ++j) acc[static_cast<size_t>(j)] += w * vr[j];
      }
      const float inv = 1.0f / sum;
      float* o = out + h * d;
      for (int64_t j = 0; j < d; ++j) o[j] = acc[static_cast<size_t>(j)] * inv;
    }
  });
}

}  // namespace specula
