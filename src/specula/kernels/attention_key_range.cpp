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
      attend_one_head(q + h * d, kv, kvh, key_begin, n, scale, weights.data(), acc.data(), out + h * d);
    }
  });
}

}  // namespace specula
