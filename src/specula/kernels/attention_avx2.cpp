// AVX2 attention kernels (attention_kernels.h): the portable loops' bytes — attention_dot's 16
// partial sums as two 8-lane vectors of fused multiply-adds folded in its order, the weighted V
// sum lane-wise with fused multiply-adds — with each K and V row read once
// for all the tasks of a call (a GQA group's heads, the rows of a chunk) instead of once per task.
// Rows of f32 and bf16 stores alike (bf16 widened exactly into `row` first).
#include <immintrin.h>

#include "specula/kernels/attention.h"
#include "specula/kernels/attention_kernels.h"

namespace specula::detail {

namespace {

// No standard-library or header inline functions here (std::min, KvStoreView::k_row): a copy
// compiled with AVX2 could be the one the linker keeps for baseline callers.

// KV head kvh's part of the K or V row of position pos, as head_dim floats (bf16 widened into row).
const float* head_row(const void* const* blocks, const KvStoreView& kv, int64_t pos, int64_t kvh, float* row) {
  const int64_t r = kv.wrap > 0 ? pos % kv.wrap : pos;
  const bool bf16 = kv.type == KvType::Bf16;
  const int64_t element = bf16 ? 2 : 4;
  const char* p = static_cast<const char*>(blocks[r / kv.block_rows]) +
                  (kvh * kv.block_rows + r % kv.block_rows) * kv.head_dim * element;
  if (!bf16) return reinterpret_cast<const float*>(p);
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  int64_t j = 0;
  for (; j + 8 <= kv.head_dim; j += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + j)));
    _mm256_storeu_ps(row + j, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; j < kv.head_dim; ++j) {
    const uint32_t bits = static_cast<uint32_t>(h[j]) << 16;
    row[j] = _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(bits))));
  }
  return row;
}

// attention_dot: element j into partial sum j % 16 (lanes 0-7 of a0, 8-15 of a1), then
// part[i] += part[i + width] for width 8, 4, 2, 1.
float dot16(const float* q, const float* k, int64_t d) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), _mm256_loadu_ps(k + j), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 8), _mm256_loadu_ps(k + j + 8), a1);
  }
  if (j < d) {  // the tail goes into part[0 .. d - j); the other sums are left as they are
    alignas(32) float qt[16] = {}, kt[16] = {};
    alignas(32) int32_t in[16] = {};
    for (int64_t i = 0; j + i < d; ++i) {
      qt[i] = q[j + i];
      kt[i] = k[j + i];
      in[i] = -1;
    }
    a0 = _mm256_blendv_ps(a0, _mm256_fmadd_ps(_mm256_load_ps(qt), _mm256_load_ps(kt), a0),
                          _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(in))));
    a1 = _mm256_blendv_ps(a1, _mm256_fmadd_ps(_mm256_load_ps(qt + 8), _mm256_load_ps(kt + 8), a1),
                          _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(in + 8))));
  }
  const __m256 s8 = _mm256_add_ps(a0, a1);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

bool covers(const HeadTask& task, int64_t t) { return t >= task.first_key && t < task.first_key + task.n; }

}  // namespace

void attention_scores_avx2(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                           int64_t span, float scale, float* scores, float* row) {
  const int64_t d = kv.head_dim;
  for (int64_t t = lo; t < lo + span; ++t) {
    const float* k = head_row(kv.k_blocks, kv, t, kvh, row);
    for (int64_t i = 0; i < count; ++i)
      if (covers(tasks[i], t)) scores[i * span + (t - lo)] = dot16(tasks[i].q, k, d) * scale;
  }
}

void weighted_v_avx2(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
                     const float* w, const float* inv, float* acc, float* row) {
  const int64_t d = kv.head_dim;
  for (int64_t j = 0; j < count * d; ++j) acc[j] = 0.0f;
  for (int64_t t = lo; t < lo + span; ++t) {
    const float* v = head_row(kv.v_blocks, kv, t, kvh, row);
    for (int64_t i = 0; i < count; ++i) {
      if (!covers(tasks[i], t)) continue;
      float* a = acc + i * d;
      const float wi = w[i * span + (t - lo)];
      const __m256 wv = _mm256_set1_ps(wi);
      int64_t j = 0;
      for (; j + 8 <= d; j += 8)
        _mm256_storeu_ps(a + j, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + j), _mm256_loadu_ps(a + j)));
      for (; j < d; ++j) a[j] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(wi), _mm_set_ss(v[j]), _mm_set_ss(a[j])));
    }
  }
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < d; ++j) tasks[i].out[j] = acc[i * d + j] * inv[i];
}

}  // namespace specula::detail
