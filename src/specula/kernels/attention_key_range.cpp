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

  const AttentionWorkSplit split = attention_work_split(1, kv_heads, group, pool.size());
  const int64_t slices = (group + split.heads - 1) / split.heads;
  pool.parallel_for(kv_heads * slices, 1, [&](int, int64_t begin, int64_t end) {
    AttentionScratch scratch;
    std::vector<HeadTask> tasks;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t kvh = item / slices;
      const int64_t h0 = kvh * group + item % slices * split.heads;
      const int64_t h1 = std::min(h0 + split.heads, (kvh + 1) * group);
      tasks.clear();
      for (int64_t h = h0; h < h1; ++h) tasks.push_back({q + h * d, out + h * d, key_begin, n});
      attend_heads(tasks.data(), static_cast<int64_t>(tasks.size()), kv, kvh, scale, scratch);
    }
  });
}

}  // namespace specula
