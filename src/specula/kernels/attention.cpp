#include "specula/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "specula/kernels/attention_kernels.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/softmax_exp.h"
#include "specula/util/error.h"

namespace specula {

namespace {

enum class Kernels { Portable, Avx2, Avx512 };

// The portable loops: every multiply-add is std::fma (one rounding, as the vector kernels' fused
// instructions), every other step one rounding (built without FMA contraction), so the bytes are
// the same on every CPU. The AVX2 and AVX-512 kernels compute the same bytes. `row`: head_dim
// floats where a bf16 row is widened.
void scores_portable(const HeadTask& task, const KvStoreView& kv, int64_t kvh, float scale, float* scores, float* row) {
  const int64_t d = kv.head_dim;
  for (int64_t t = 0; t < task.n; ++t)
    scores[t] = attention_dot(task.q, kv.k_head(task.first_key + t, kvh, row), d) * scale;
}

void weighted_v_portable(const HeadTask& task, const KvStoreView& kv, int64_t kvh, const float* w, float inv,
                         float* acc, float* row) {
  const int64_t d = kv.head_dim;
  std::fill(acc, acc + d, 0.0f);
  for (int64_t t = 0; t < task.n; ++t) {
    const float* vr = kv.v_head(task.first_key + t, kvh, row);
    for (int64_t j = 0; j < d; ++j) acc[j] = std::fma(w[t], vr[j], acc[j]);
  }
  for (int64_t j = 0; j < d; ++j) task.out[j] = acc[j] * inv;
}

}  // namespace

float softmax_numerators(float* scores, int64_t n) {
  float m = -INFINITY;
  for (int64_t t = 0; t < n; ++t) m = std::max(m, scores[t]);
  constexpr int kLanes = 16;
  float part[kLanes] = {};
  for (int64_t t = 0; t < n; ++t) {
    scores[t] = softmax_exp(scores[t] - m);
    part[t % kLanes] += scores[t];
  }
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) part[i] += part[i + width];
  }
  return part[0];
}

void attend_heads(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, float scale,
                  AttentionScratch& scratch) {
  if (count <= 0) return;
  const int64_t d = kv.head_dim;
  // Scores of task i live at scores[i * span + (key - lo)] over the union [lo, lo + span) of the
  // tasks' key ranges.
  int64_t lo = tasks[0].first_key, hi = lo;
  for (int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, tasks[i].first_key);
    hi = std::max(hi, tasks[i].first_key + tasks[i].n);
  }
  const int64_t span = hi - lo;
  if (static_cast<int64_t>(scratch.scores.size()) < count * span)
    scratch.scores.resize(static_cast<size_t>(count * span));
  if (static_cast<int64_t>(scratch.acc.size()) < count * (d + 1))
    scratch.acc.resize(static_cast<size_t>(count * (d + 1)));
  if (kv.type != KvType::F32 && static_cast<int64_t>(scratch.rows.size()) < kAttentionRowSlots * d)
    scratch.rows.resize(static_cast<size_t>(kAttentionRowSlots * d));
  float* scores = scratch.scores.data();
  float* rows = scratch.rows.data();
  float* inv = scratch.acc.data() + count * d;  // one 1 / softmax sum per task
#if defined(SPECULA_X86)
  const Isa isa = active_isa();
  const Kernels kernels = isa == Isa::Avx512 ? Kernels::Avx512 : isa >= Isa::Avx2 ? Kernels::Avx2 : Kernels::Portable;
#else
  const Kernels kernels = Kernels::Portable;
#endif
  switch (kernels) {
#if defined(SPECULA_X86)
    case Kernels::Avx512: detail::attention_scores_avx512(tasks, count, kv, kvh, lo, span, scale, scores, rows); break;
    case Kernels::Avx2: detail::attention_scores_avx2(tasks, count, kv, kvh, lo, span, scale, scores, rows); break;
#endif
    default:
      for (int64_t i = 0; i < count; ++i)
        scores_portable(tasks[i], kv, kvh, scale, scores + i * span + (tasks[i].first_key - lo), rows);
  }
  for (int64_t i = 0; i < count; ++i) {
    float* si = scores + i * span + (tasks[i].first_key - lo);
#if defined(SPECULA_X86)
    const float total = kernels == Kernels::Avx512 ? detail::softmax_numerators_avx512(si, tasks[i].n)
                        : kernels == Kernels::Avx2 ? detail::softmax_numerators_avx2(si, tasks[i].n)
                                                   : softmax_numerators(si, tasks[i].n);
#else
    const float total = softmax_numerators(si, tasks[i].n);
#endif
    inv[i] = 1.0f / total;
  }
  switch (kernels) {
#if defined(SPECULA_X86)
    case Kernels::Avx512:
      detail::weighted_v_avx512(tasks, count, kv, kvh, lo, span, scores, inv, scratch.acc.data(), rows);
      break;
    case Kernels::Avx2:
      detail::weighted_v_avx2(tasks, count, kv, kvh, lo, span, scores, inv, scratch.acc.data(), rows);
      break;
#endif
    default:
      for (int64_t i = 0; i < count; ++i)
        weighted_v_portable(tasks[i], kv, kvh, scores + i * span + (tasks[i].first_key - lo), inv[i],
                            scratch.acc.data(), rows);
  }
}

AttentionWorkSplit attention_work_split(int64_t rows, int64_t kv_heads, int64_t group, int threads) {
  constexpr int64_t kMaxRows = 8;
  AttentionWorkSplit s;
  s.heads = group;
  if (rows * kv_heads < threads && group > 1) {
    const int64_t parts = std::min<int64_t>(group, (threads + rows * kv_heads - 1) / (rows * kv_heads));
    s.heads = (group + parts - 1) / parts;
  }
  // Row blocks: enough of them for the threads (with the KV heads), at most kMaxRows rows each,
  // and of near-equal sizes.
  const int64_t row_parts = std::max<int64_t>((threads + kv_heads - 1) / kv_heads, (rows + kMaxRows - 1) / kMaxRows);
  s.rows = std::max<int64_t>(1, (rows + row_parts - 1) / row_parts);
  return s;
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
  const AttentionWorkSplit split = attention_work_split(rows, kv_heads, group, pool.size());
  const int64_t row_items = (rows + split.rows - 1) / split.rows;
  const int64_t slices = (group + split.heads - 1) / split.heads;

  pool.parallel_for(row_items * kv_heads * slices, 1, [&](int, int64_t begin, int64_t end) {
    AttentionScratch scratch;
    std::vector<HeadTask> tasks;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r0 = item / (kv_heads * slices) * split.rows;
      const int64_t r1 = std::min(rows, r0 + split.rows);
      const int64_t kvh = item / slices % kv_heads;
      const int64_t h0 = kvh * group + item % slices * split.heads;
      const int64_t h1 = std::min(h0 + split.heads, (kvh + 1) * group);
      tasks.clear();
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t pos = first_position + r;
        const int64_t lo = attention_first_key(pos, params.window);
        for (int64_t h = h0; h < h1; ++h)
          tasks.push_back({q + r * ld_q + h * d, out + r * ld_out + h * d, lo, pos - lo + 1});
      }
      attend_heads(tasks.data(), static_cast<int64_t>(tasks.size()), kv, kvh, params.scale, scratch);
    }
  });
}

}  // namespace specula
