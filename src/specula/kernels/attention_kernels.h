#pragma once
// Internal: the AVX-512 and AVX2 halves of attend_heads() (kernels/attention.cpp dispatches on
// active_isa()). They compute the same bytes as the portable loops there.
#include <cstdint>

#include "specula/kernels/attention.h"

namespace specula::detail {

#if defined(SPECULA_X86)
// scores[i * span + (t - lo)] = attention_dot(tasks[i].q, K row of key t) * scale for each task's
// keys t; [lo, lo + span) holds every task's range. f32 and bf16 stores.
void attention_scores_avx512(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                             int64_t span, float scale, float* scores, float* rows);

// tasks[i].out[j] = (sum over the task's keys t ascending of w[i * span + (t - lo)] * V[t][j]) * inv[i];
// acc: count * head_dim floats of scratch.
void weighted_v_avx512(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                       int64_t span, const float* w, const float* inv, float* acc, float* rows);

// softmax_numerators (attention.h), the same bytes.
float softmax_numerators_avx512(float* scores, int64_t n);

// The same three steps with AVX2.
void attention_scores_avx2(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                           int64_t span, float scale, float* scores, float* rows);
float softmax_numerators_avx2(float* scores, int64_t n);
void weighted_v_avx2(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
                     const float* w, const float* inv, float* acc, float* rows);
#endif

}  // namespace specula::detail
