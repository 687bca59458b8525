// AVX2 attention kernels (attention_kernels.h): the portable loops' bytes — attention_dot's 16
// partial sums as two 8-lane vectors of fused multiply-adds folded in its order, the softmax's
// exponential as softmax_exp.h writes it with its sum in 16 partial sums, the weighted V sum
// lane-wise with fused multiply-adds in ascending key order. Each K and V row is read once for
// all the tasks of a call (a GQA group's heads, the rows of a chunk); each K vector is loaded once
// for up to 4 tasks, and a slice of up to 2 tasks' V sums stays in registers over a block of keys.
// Rows of f32 and bf16 stores alike (bf16 widened exactly as it is loaded); q8 rows are
// dequantized first (exactly, kv_row_walker.h).
#include <immintrin.h>

#include <cmath>

#include "specula/kernels/attention.h"
#include "specula/kernels/attention_kernels.h"
#include "specula/kernels/kv_row_walker.h"
#include "specula/kernels/softmax_exp.h"

namespace specula::detail {

namespace {

// No standard-library or header inline functions here (std::min, KvStoreView::k_row): a copy
// compiled with AVX2 could be the one the linker keeps for baseline callers.
inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

constexpr int kScoreHeads = 4;    // tasks sharing each K vector load
constexpr int kValueHeads = 2;    // tasks whose V sums ...
constexpr int kValueVecs = 4;     // ... of this many 8-lane vectors stay in registers
constexpr int64_t kKeyBlock = 8;  // over a block of this many keys
constexpr int64_t kPrefetchKeys = 16;

// 8 elements of a row as f32: f32 loaded, bf16 widened exactly (the bits shifted up by 16).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) {
  return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(static_cast<uint32_t>(*p) << 16))));
}
inline float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

void prefetch_row(const void* row, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(static_cast<const char*>(row) + b, _MM_HINT_T0);
}

// attention_dot's fold of lanes 0-7 (lo) and 8-15 (hi): part[i] += part[i + width], width 8, 4, 2, 1.
inline float fold16(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// out[i] = attention_dot(q[i], k, d) * scale for HEADS tasks: each K vector loaded once for all.
template <int HEADS, typename T>
void dot_heads(const float* const* q, const T* k, int64_t d, float scale, float* const* out) {
  __m256 lo[HEADS], hi[HEADS];
  for (int i = 0; i < HEADS; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= d; j += 16) {
    const __m256 k0 = load8(k + j), k1 = load8(k + j + 8);
    for (int i = 0; i < HEADS; ++i) {
      lo[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q[i] + j), k0, lo[i]);
      hi[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q[i] + j + 8), k1, hi[i]);
    }
  }
  for (int i = 0; i < HEADS; ++i) {
    if (j < d) {  // the tail goes into part[0 .. d - j); the other sums are left as they are
      alignas(32) float part[16];
      _mm256_store_ps(part, lo[i]);
      _mm256_store_ps(part + 8, hi[i]);
      for (int64_t t = 0; j + t < d; ++t) part[t] = fma1(q[i][j + t], load1(k + j + t), part[t]);
      lo[i] = _mm256_load_ps(part);
      hi[i] = _mm256_load_ps(part + 8);
    }
    *out[i] = fold16(lo[i], hi[i]) * scale;
  }
}

template <typename Rows>
void scores(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
            float scale, float* scores, float* slots) {
  using T = typename Rows::Element;
  const int64_t d = kv.head_dim;
  const int64_t row_bytes = kv.head_row_bytes();
  const float* q[kScoreHeads];
  float* out[kScoreHeads];
  Rows key(kv.k_blocks, kv, lo, kvh, slots);
  RowWalker ahead(kv.k_blocks, kv, lo, kvh);
  for (int64_t t = lo; t < lo + kPrefetchKeys && t < lo + span; ++t) ahead.next();
  for (int64_t t = lo; t < lo + span; ++t, key.next(), ahead.next()) {
    if (t + kPrefetchKeys < lo + span) prefetch_row(ahead.row(), row_bytes);
    const T* k = key.row(0);
    for (int64_t h0 = 0; h0 < count; h0 += kScoreHeads) {
      const int heads = static_cast<int>(min_i64(kScoreHeads, count - h0));
      bool all = true;  // every task of the group sees key t
      for (int i = 0; i < heads; ++i) {
        const HeadTask& task = tasks[h0 + i];
        q[i] = task.q;
        out[i] = scores + (h0 + i) * span + (t - lo);
        all = all && t >= task.first_key && t < task.first_key + task.n;
      }
      if (all && heads == kScoreHeads) {
        dot_heads<kScoreHeads>(q, k, d, scale, out);
        continue;
      }
      for (int i = 0; i < heads; ++i) {
        const HeadTask& task = tasks[h0 + i];
        if (t >= task.first_key && t < task.first_key + task.n) dot_heads<1>(q + i, k, d, scale, out + i);
      }
    }
  }
}

// For HEADS tasks: acc[i][c0 .. c0 + 8 * kValueVecs) += w_i(t) * V row t over the keys of one
// block, ascending, each task only over the keys it sees; the slice stays in registers.
template <int HEADS, typename T>
void weighted_v_slice(const T* const* rows, int keys, int64_t t0, const HeadTask* tasks, const float* w, int64_t span,
                      int64_t lo, int64_t c0, float* acc, int64_t d) {
  __m256 a[HEADS][kValueVecs];
  for (int i = 0; i < HEADS; ++i)
    for (int v = 0; v < kValueVecs; ++v) a[i][v] = _mm256_loadu_ps(acc + i * d + c0 + 8 * v);
  for (int r = 0; r < keys; ++r) {
    const int64_t t = t0 + r;
    __m256 vv[kValueVecs];
    for (int v = 0; v < kValueVecs; ++v) vv[v] = load8(rows[r] + c0 + 8 * v);
    for (int i = 0; i < HEADS; ++i) {
      if (t < tasks[i].first_key || t >= tasks[i].first_key + tasks[i].n) continue;
      const __m256 wi = _mm256_set1_ps(w[i * span + (t - lo)]);
      for (int v = 0; v < kValueVecs; ++v) a[i][v] = _mm256_fmadd_ps(wi, vv[v], a[i][v]);
    }
  }
  for (int i = 0; i < HEADS; ++i)
    for (int v = 0; v < kValueVecs; ++v) _mm256_storeu_ps(acc + i * d + c0 + 8 * v, a[i][v]);
}

template <typename Rows>
void weighted_v(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
                const float* w, const float* inv, float* acc, float* slots) {
  using T = typename Rows::Element;
  const int64_t d = kv.head_dim;
  const int64_t slice = 8 * kValueVecs;
  const int64_t vector_dims = d / slice * slice;  // the rest is summed one element at a time
  const int64_t row_bytes = kv.head_row_bytes();
  for (int64_t j = 0; j < count * d; ++j) acc[j] = 0.0f;
  const T* rows[kKeyBlock];
  Rows value(kv.v_blocks, kv, lo, kvh, slots);
  RowWalker ahead(kv.v_blocks, kv, lo, kvh);
  for (int64_t t = lo; t < lo + kKeyBlock && t < lo + span; ++t) ahead.next();
  for (int64_t t0 = lo; t0 < lo + span; t0 += kKeyBlock) {
    const int keys = static_cast<int>(min_i64(kKeyBlock, lo + span - t0));
    for (int r = 0; r < keys; ++r, value.next(), ahead.next()) {
      rows[r] = value.row(r);
      if (t0 + r + kKeyBlock < lo + span) prefetch_row(ahead.row(), row_bytes);
    }
    for (int64_t h0 = 0; h0 < count; h0 += kValueHeads) {
      const int heads = static_cast<int>(min_i64(kValueHeads, count - h0));
      float* ah = acc + h0 * d;
      const float* wh = w + h0 * span;
      for (int64_t c0 = 0; c0 < vector_dims; c0 += slice) {
        if (heads == 2) {
          weighted_v_slice<2>(rows, keys, t0, tasks + h0, wh, span, lo, c0, ah, d);
        } else {
          weighted_v_slice<1>(rows, keys, t0, tasks + h0, wh, span, lo, c0, ah, d);
        }
      }
      for (int i = 0; i < heads; ++i) {
        const HeadTask& task = tasks[h0 + i];
        for (int r = 0; r < keys; ++r) {
          const int64_t t = t0 + r;
          if (t < task.first_key || t >= task.first_key + task.n) continue;
          const float wi = wh[i * span + (t - lo)];
          for (int64_t j = vector_dims; j < d; ++j) ah[i * d + j] = fma1(wi, load1(rows[r] + j), ah[i * d + j]);
        }
      }
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    const __m256 s = _mm256_set1_ps(inv[i]);
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) _mm256_storeu_ps(tasks[i].out + j, _mm256_mul_ps(_mm256_loadu_ps(acc + i * d + j), s));
    for (; j < d; ++j) tasks[i].out[j] = acc[i * d + j] * inv[i];
  }
}

// softmax_exp on 8 lanes: the same operations in the same order.
inline __m256 softmax_exp8(__m256 x) {
  using namespace softmax_exp_constants;
  const __m256 round = _mm256_set1_ps(kRound);
  const __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), round), round);
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP1));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP2));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP3));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP4));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP5));
  const __m256 e = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
  // +0 below the floor; NaN lanes (not below it) stay NaN.
  return _mm256_and_ps(y, _mm256_cmp_ps(x, _mm256_set1_ps(kSoftmaxExpFloor), _CMP_NLT_UQ));
}

}  // namespace

float softmax_numerators_avx2(float* scores, int64_t n) {
  // The maximum as the portable loop's std::max finds it (a NaN score is skipped).
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) m = _mm256_max_ps(_mm256_loadu_ps(scores + t), m);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  float mx = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
  for (; t < n; ++t) mx = scores[t] > mx ? scores[t] : mx;
  const __m256 mv = _mm256_set1_ps(mx);
  // Key t into partial sum t % 16: lanes 0-7 of p0, 8-15 of p1.
  __m256 p0 = _mm256_setzero_ps(), p1 = _mm256_setzero_ps();
  for (t = 0; t + 16 <= n; t += 16) {
    const __m256 e0 = softmax_exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + t), mv));
    const __m256 e1 = softmax_exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + t + 8), mv));
    _mm256_storeu_ps(scores + t, e0);
    _mm256_storeu_ps(scores + t + 8, e1);
    p0 = _mm256_add_ps(p0, e0);
    p1 = _mm256_add_ps(p1, e1);
  }
  if (t < n) {
    alignas(32) float x[16], part[16];
    for (int i = 0; i < 16; ++i) x[i] = t + i < n ? scores[t + i] : mx;
    const __m256 e0 = softmax_exp8(_mm256_sub_ps(_mm256_load_ps(x), mv));
    const __m256 e1 = softmax_exp8(_mm256_sub_ps(_mm256_load_ps(x + 8), mv));
    _mm256_store_ps(x, e0);
    _mm256_store_ps(x + 8, e1);
    _mm256_store_ps(part, p0);
    _mm256_store_ps(part + 8, p1);
    for (int i = 0; t + i < n; ++i) {
      scores[t + i] = x[i];
      part[i] += x[i];
    }
    p0 = _mm256_load_ps(part);
    p1 = _mm256_load_ps(part + 8);
  }
  return fold16(p0, p1);
}

void attention_scores_avx2(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                           int64_t span, float scale, float* out, float* rows) {
  switch (kv.type) {
    case KvType::Bf16: scores<StoredRows<uint16_t>>(tasks, count, kv, kvh, lo, span, scale, out, rows); break;
    case KvType::Q8: scores<DequantizedRows>(tasks, count, kv, kvh, lo, span, scale, out, rows); break;
    default: scores<StoredRows<float>>(tasks, count, kv, kvh, lo, span, scale, out, rows); break;
  }
}

void weighted_v_avx2(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
                     const float* w, const float* inv, float* acc, float* rows) {
  switch (kv.type) {
    case KvType::Bf16: weighted_v<StoredRows<uint16_t>>(tasks, count, kv, kvh, lo, span, w, inv, acc, rows); break;
    case KvType::Q8: weighted_v<DequantizedRows>(tasks, count, kv, kvh, lo, span, w, inv, acc, rows); break;
    default: weighted_v<StoredRows<float>>(tasks, count, kv, kvh, lo, span, w, inv, acc, rows); break;
  }
}

}  // namespace specula::detail
