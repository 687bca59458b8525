// attend_heads() with AVX-512: the same operations in the same order as the portable code in
// attention.cpp, so the bytes are the same. One zmm holds attention_dot's 16 partial sums (lane i
// is part[i], each step a fused multiply-add as std::fma there) and is folded in its order; the
// weighted V sum is lane-wise anyway. Every other multiply and add stays two roundings: this file
// is built with -ffp-contract=off.
//
// Why it is faster: the portable loops read the K and V rows once per task, keep the V
// accumulators in memory and compute the softmax one key at a time. Here every K and V row is read
// once for all the tasks (a GQA group's heads, and the rows of a verify chunk), each K vector is
// loaded once for a register block of 4 heads x 4 keys (16 independent chains), a slice of the V
// accumulators of up to 4 tasks stays in registers over a block of keys, the softmax runs 16 keys
// at a time, and the rows ahead are prefetched (the V rows of the next block spread over the
// current block's work, so the misses overlap it). Rows of f32 and bf16 stores alike: a bf16
// vector is widened exactly as it is loaded, a q8 vector dequantized as it is loaded.
//
// GCC 12's AVX-512 headers build _mm512_undefined_*() as a self-initialized variable, which trips
// -W(maybe-)uninitialized wherever an intrinsic using it is inlined; the value is never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cmath>

#include "specula/kernels/attention.h"
#include "specula/kernels/attention_kernels.h"
#include "specula/kernels/kv_row_walker.h"
#include "specula/kernels/softmax_exp.h"

namespace specula::detail {
namespace {

constexpr int64_t kLanes = 16;
constexpr int kKeysAtOnce = 4;         // keys whose K vectors serve a register block of heads
constexpr int kHeadsAtOnce = 4;        // tasks per register block: scores, and V accumulators ...
constexpr int kVecsAtOnce = 4;         // ... times this many vectors (64 dims) held in registers
constexpr int64_t kPrefetchKeys = 16;  // how far ahead K rows are fetched
constexpr int64_t kKeyBlock = 8;       // V rows summed while in L1, the next block's arriving

// No standard-library or header inline functions here (std::min, KvStoreView::k_row): a copy
// compiled with AVX-512 could be the one the linker keeps for baseline callers.
inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

// 16 elements of a row as f32: f32 loaded, bf16 widened exactly (the bits shifted up by 16).
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
// The lanes of `m` (the others zero).
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

// A q8 row (kv_type.h) and an element offset into it: the kernels' row handle for q8 stores,
// dequantized as loaded (a code times its bf16 scale, exact in f32: the bytes DequantizedRows
// writes). Offsets are multiples of 16, so a vector's lanes share one 32-element scale.
struct Q8At {
  const char* row;
  int64_t j;
  int64_t dim;
};
inline Q8At operator+(Q8At a, int64_t n) {
  a.j += n;
  return a;
}
inline __m512 q8_scale(Q8At p) {
  const uint16_t bits = reinterpret_cast<const uint16_t*>(p.row + p.dim)[p.j / kKvQ8Block];
  return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(bits) << 16)));
}
inline __m512 load16(Q8At p) {
  const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.row + p.j));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)), q8_scale(p));
}
inline __m512 load16(Q8At p, __mmask16 m) {
  if (m == 0) return _mm512_setzero_ps();  // a vector past the row's end: its scale is not there
  const __m128i codes = _mm_maskz_loadu_epi8(m, p.row + p.j);
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)), q8_scale(p));
}

// The rows of a q8 store as Q8At handles (no copy).
class Q8Rows {
 public:
  using Handle = Q8At;
  Q8Rows(const void* const* blocks, const KvStoreView& kv, int64_t pos, int64_t kvh, float* /*slots*/)
      : walk_(blocks, kv, pos, kvh), dim_(kv.head_dim) {}
  Q8At row(int /*slot*/) const { return {walk_.row(), 0, dim_}; }
  void next() { walk_.next(); }

 private:
  RowWalker walk_;
  int64_t dim_;
};

// Prefetches the K or V rows `distance` keys ahead of the ones being read: without it one core
// waits on every row's miss.
class RowPrefetcher {
 public:
  RowPrefetcher(const void* const* blocks, const KvStoreView& kv, int64_t first_key, int64_t n, int64_t kvh,
                int64_t distance)
      : walk_(blocks, kv, first_key, kvh), bytes_(kv.head_row_bytes()), left_(n) {
    for (int64_t i = 0; i < distance && left_ > 0; ++i) advance();
  }
  // Prefetches the next row.
  void advance() {
    if (left_ <= 0) return;
    const char* p = walk_.row();
    for (int64_t b = 0; b < bytes_; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
    walk_.next();
    --left_;
  }

 private:
  RowWalker walk_;
  int64_t bytes_, left_;
};

// Fills rows[0, keys) with the next `keys` rows of `source` (StoredRows or Q8Rows).
template <typename Rows>
void next_rows(Rows& source, int keys, typename Rows::Handle* rows) {
  for (int r = 0; r < keys; ++r, source.next()) rows[r] = source.row(r);
}

// attention_dot's fold: part[i] += part[i + width] for width 8, 4, 2, 1.
inline float fold16(__m512 v) {
  // (The masked extracts: GCC 12 warns about the undefined source of the unmasked ones.)
  const __m256 low = _mm512_mask_extractf32x8_ps(_mm256_setzero_ps(), 0xFF, v, 0);
  const __m256 high = _mm512_mask_extractf32x8_ps(_mm256_setzero_ps(), 0xFF, v, 1);
  const __m256 s8 = _mm256_add_ps(low, high);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// Scores of HEADS query heads for the KEYS keys k[0, KEYS): out[i][r] = attention_dot(q[i], k[r]) *
// scale, HEADS x KEYS independent chains, each K vector loaded (and widened) once for all heads.
template <int HEADS, int KEYS, typename R>
inline void dot_block(const float* const* q, const R* k, int64_t d, float scale, float* const* out) {
  __m512 acc[HEADS][KEYS];
  for (int i = 0; i < HEADS; ++i)
    for (int r = 0; r < KEYS; ++r) acc[i][r] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + kLanes <= d; j += kLanes) {
    __m512 kv[KEYS];
    for (int r = 0; r < KEYS; ++r) kv[r] = load16(k[r] + j);
    for (int i = 0; i < HEADS; ++i) {
      const __m512 qv = _mm512_loadu_ps(q[i] + j);
      for (int r = 0; r < KEYS; ++r) acc[i][r] = _mm512_fmadd_ps(qv, kv[r], acc[i][r]);
    }
  }
  if (j < d) {  // the tail goes into part[0 .. d - j), as in attention_dot
    const __mmask16 m = static_cast<__mmask16>((1u << (d - j)) - 1);
    __m512 kv[KEYS];
    for (int r = 0; r < KEYS; ++r) kv[r] = load16(k[r] + j, m);
    for (int i = 0; i < HEADS; ++i) {
      const __m512 qv = _mm512_maskz_loadu_ps(m, q[i] + j);
      for (int r = 0; r < KEYS; ++r) acc[i][r] = _mm512_mask3_fmadd_ps(qv, kv[r], acc[i][r], m);
    }
  }
  for (int i = 0; i < HEADS; ++i)
    for (int r = 0; r < KEYS; ++r) out[i][r] = fold16(acc[i][r]) * scale;
}

// For the HEADS tasks of one register block: acc[i][c0 .. c0 + 16 * nvec) += w_i(u) * V row u
// over the keys u0 + r (r < keys) of one block, ascending, each task only over its own keys
// [begin[i], end[i]) (masked adds: the other keys change nothing). The slice of acc stays in
// registers over the block; `last` masks the slice's last vector.
template <int HEADS, typename R>
void weighted_v_block(const R* rows, int keys, int64_t u0, const float* w, int64_t span, const int64_t* begin,
                      const int64_t* end, int64_t c0, int nvec, __mmask16 last, float* acc, int64_t d) {
  __mmask16 mask[kVecsAtOnce];
  for (int v = 0; v < kVecsAtOnce; ++v) mask[v] = v < nvec - 1 ? __mmask16(0xFFFF) : v == nvec - 1 ? last : 0;
  __m512 a[HEADS][kVecsAtOnce];
  for (int i = 0; i < HEADS; ++i)
    for (int v = 0; v < kVecsAtOnce; ++v) a[i][v] = _mm512_maskz_loadu_ps(mask[v], acc + i * d + c0 + v * kLanes);
  for (int r = 0; r < keys; ++r) {
    const int64_t u = u0 + r;
    __m512 vv[kVecsAtOnce];
    for (int v = 0; v < kVecsAtOnce; ++v) vv[v] = load16(rows[r] + c0 + v * kLanes, mask[v]);
    for (int i = 0; i < HEADS; ++i) {
      const __mmask16 in = u >= begin[i] && u < end[i] ? __mmask16(0xFFFF) : __mmask16(0);
      const __m512 wi = _mm512_set1_ps(w[i * span + u]);
      for (int v = 0; v < kVecsAtOnce; ++v) a[i][v] = _mm512_mask3_fmadd_ps(wi, vv[v], a[i][v], in);
    }
  }
  for (int i = 0; i < HEADS; ++i)
    for (int v = 0; v < kVecsAtOnce; ++v) _mm512_mask_storeu_ps(acc + i * d + c0 + v * kLanes, mask[v], a[i][v]);
}

// weighted_v_block where every task sees all kKeyBlock keys of the block and the slice is
// kVecsAtOnce whole vectors: the same adds, without masks.
template <int HEADS, typename R>
void weighted_v_block_whole(const R* rows, int64_t u0, const float* w, int64_t span, int64_t c0, float* acc,
                            int64_t d) {
  __m512 a[HEADS][kVecsAtOnce];
  for (int i = 0; i < HEADS; ++i)
    for (int v = 0; v < kVecsAtOnce; ++v) a[i][v] = _mm512_loadu_ps(acc + i * d + c0 + v * kLanes);
  for (int r = 0; r < kKeyBlock; ++r) {
    __m512 vv[kVecsAtOnce];
    for (int v = 0; v < kVecsAtOnce; ++v) vv[v] = load16(rows[r] + c0 + v * kLanes);
    for (int i = 0; i < HEADS; ++i) {
      const __m512 wi = _mm512_set1_ps(w[i * span + u0 + r]);
      for (int v = 0; v < kVecsAtOnce; ++v) a[i][v] = _mm512_fmadd_ps(wi, vv[v], a[i][v]);
    }
  }
  for (int i = 0; i < HEADS; ++i)
    for (int v = 0; v < kVecsAtOnce; ++v) _mm512_storeu_ps(acc + i * d + c0 + v * kLanes, a[i][v]);
}

template <typename Rows>
void scores(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
            float scale, float* scores, float* slots) {
  using R = typename Rows::Handle;
  const int64_t d = kv.head_dim;
  // Keys in blocks whose K rows, read from memory once, serve every task; within a block, up to
  // kHeadsAtOnce tasks that see all its keys share each K vector load.
  Rows key_rows(kv.k_blocks, kv, lo, kvh, slots);
  RowPrefetcher ahead(kv.k_blocks, kv, lo, span, kvh, kPrefetchKeys);
  R k[kKeysAtOnce];
  const float* q[kHeadsAtOnce];
  float* out[kHeadsAtOnce];
  for (int64_t u = 0; u < span; u += kKeysAtOnce) {
    const int keys = static_cast<int>(min_i64(kKeysAtOnce, span - u));
    next_rows(key_rows, keys, k);
    for (int r = 0; r < keys; ++r) ahead.advance();
    for (int64_t h0 = 0; h0 < count; h0 += kHeadsAtOnce) {
      const int heads = static_cast<int>(min_i64(kHeadsAtOnce, count - h0));
      bool whole = keys == kKeysAtOnce;  // every task of the group sees every key of the block
      for (int i = 0; i < heads; ++i) {
        const HeadTask& t = tasks[h0 + i];
        q[i] = t.q;
        out[i] = scores + (h0 + i) * span + u;
        whole = whole && t.first_key - lo <= u && u + kKeysAtOnce <= t.first_key - lo + t.n;
      }
      if (whole) {
        switch (heads) {
          case 1: dot_block<1, kKeysAtOnce>(q, k, d, scale, out); break;
          case 2: dot_block<2, kKeysAtOnce>(q, k, d, scale, out); break;
          case 3: dot_block<3, kKeysAtOnce>(q, k, d, scale, out); break;
          default: dot_block<4, kKeysAtOnce>(q, k, d, scale, out); break;
        }
        continue;
      }
      for (int i = 0; i < heads; ++i) {
        const HeadTask& t = tasks[h0 + i];
        for (int r = 0; r < keys; ++r) {
          const int64_t key = lo + u + r;
          float* o = out[i] + r;
          if (key >= t.first_key && key < t.first_key + t.n) dot_block<1, 1>(q + i, k + r, d, scale, &o);
        }
      }
    }
  }
}

template <typename Rows>
void weighted_v(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
                const float* w, const float* inv, float* acc, float* slots) {
  using R = typename Rows::Handle;
  const int64_t d = kv.head_dim;
  for (int64_t j = 0; j < count * d; ++j) acc[j] = 0.0f;
  int64_t begin[kHeadsAtOnce], end[kHeadsAtOnce];
  // Keys in blocks whose V rows stay in L1/L2 while every (tasks, 64 dims) slice of them is summed:
  // each V row comes from memory once. The next block's rows are prefetched a few at a time
  // between the slices, so that their misses overlap this block's arithmetic.
  Rows value_rows(kv.v_blocks, kv, lo, kvh, slots);
  RowPrefetcher ahead(kv.v_blocks, kv, lo, span, kvh, kKeyBlock);
  const int64_t slices =
      (count + kHeadsAtOnce - 1) / kHeadsAtOnce * ((d + kVecsAtOnce * kLanes - 1) / (kVecsAtOnce * kLanes));
  R rows[kKeyBlock];
  for (int64_t u0 = 0; u0 < span; u0 += kKeyBlock) {
    const int keys = static_cast<int>(min_i64(kKeyBlock, span - u0));
    next_rows(value_rows, keys, rows);
    int64_t slice = 0, fetched = 0;  // the next block's rows prefetched so far
    for (int64_t h0 = 0; h0 < count; h0 += kHeadsAtOnce) {
      const int heads = static_cast<int>(min_i64(kHeadsAtOnce, count - h0));
      for (int i = 0; i < heads; ++i) {
        begin[i] = tasks[h0 + i].first_key - lo;
        end[i] = begin[i] + tasks[h0 + i].n;
      }
      bool whole = keys == kKeyBlock;  // every task of the group sees every key of the block
      for (int i = 0; i < heads; ++i) whole = whole && begin[i] <= u0 && u0 + kKeyBlock <= end[i];
      const float* wh = w + h0 * span;
      float* ah = acc + h0 * d;
      for (int64_t c0 = 0; c0 < d; c0 += kVecsAtOnce * kLanes) {
        for (const int64_t due = ++slice * kKeyBlock / slices; fetched < due; ++fetched) ahead.advance();
        if (whole && c0 + kVecsAtOnce * kLanes <= d) {
          switch (heads) {
            case 1: weighted_v_block_whole<1>(rows, u0, wh, span, c0, ah, d); break;
            case 2: weighted_v_block_whole<2>(rows, u0, wh, span, c0, ah, d); break;
            case 3: weighted_v_block_whole<3>(rows, u0, wh, span, c0, ah, d); break;
            default: weighted_v_block_whole<4>(rows, u0, wh, span, c0, ah, d); break;
          }
          continue;
        }
        const int64_t width = min_i64(kVecsAtOnce * kLanes, d - c0);
        const int nvec = static_cast<int>((width + kLanes - 1) / kLanes);
        const int64_t tail = width - (nvec - 1) * kLanes;
        const auto last = static_cast<__mmask16>(tail == kLanes ? 0xFFFFu : (1u << tail) - 1);
        switch (heads) {
          case 1: weighted_v_block<1>(rows, keys, u0, wh, span, begin, end, c0, nvec, last, ah, d); break;
          case 2: weighted_v_block<2>(rows, keys, u0, wh, span, begin, end, c0, nvec, last, ah, d); break;
          case 3: weighted_v_block<3>(rows, keys, u0, wh, span, begin, end, c0, nvec, last, ah, d); break;
          default: weighted_v_block<4>(rows, keys, u0, wh, span, begin, end, c0, nvec, last, ah, d); break;
        }
      }
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    const __m512 s = _mm512_set1_ps(inv[i]);
    const float* ai = acc + i * d;
    float* out = tasks[i].out;
    int64_t j = 0;
    for (; j + kLanes <= d; j += kLanes) _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_loadu_ps(ai + j), s));
    if (j < d) {
      const auto m = static_cast<__mmask16>((1u << (d - j)) - 1);
      _mm512_mask_storeu_ps(out + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, ai + j), s));
    }
  }
}

// softmax_exp on 16 lanes: the same operations in the same order.
inline __m512 softmax_exp16(__m512 x) {
  using namespace softmax_exp_constants;
  const __m512 round = _mm512_set1_ps(kRound);
  const __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), round), round);
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(kLn2Hi))),
                                 _mm512_mul_ps(n, _mm512_set1_ps(kLn2Lo)));
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP1));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP2));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP3));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP4));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP5));
  const __m512 e = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(r, r)), r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  const __m512 y = _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
  // +0 below the floor; NaN lanes (not below it) stay NaN.
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kSoftmaxExpFloor), _CMP_NLT_UQ);
  return _mm512_maskz_mov_ps(keep, y);
}

// The horizontal maximum as the portable loop's std::max finds it (a NaN score is skipped).
inline float max16(__m512 v) {
  const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_max_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_max_ss(c, _mm_shuffle_ps(c, c, 1)));
}

}  // namespace

float softmax_numerators_avx512(float* scores, int64_t n) {
  const __m512 low = _mm512_set1_ps(-INFINITY);
  __m512 m = low;
  int64_t t = 0;
  for (; t + kLanes <= n; t += kLanes) m = _mm512_max_ps(_mm512_loadu_ps(scores + t), m);
  const auto tail = static_cast<__mmask16>(t < n ? (1u << (n - t)) - 1 : 0);
  if (tail) m = _mm512_max_ps(_mm512_mask_loadu_ps(low, tail, scores + t), m);
  const __m512 mv = _mm512_set1_ps(max16(m));
  __m512 part = _mm512_setzero_ps();
  for (t = 0; t + kLanes <= n; t += kLanes) {
    const __m512 e = softmax_exp16(_mm512_sub_ps(_mm512_loadu_ps(scores + t), mv));
    _mm512_storeu_ps(scores + t, e);
    part = _mm512_add_ps(part, e);
  }
  if (tail) {
    const __m512 e = softmax_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, scores + t), mv));
    _mm512_mask_storeu_ps(scores + t, tail, e);
    part = _mm512_mask_add_ps(part, tail, part, e);
  }
  return fold16(part);
}

void attention_scores_avx512(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                             int64_t span, float scale, float* out, float* rows) {
  switch (kv.type) {
    case KvType::Bf16: scores<StoredRows<uint16_t>>(tasks, count, kv, kvh, lo, span, scale, out, rows); break;
    case KvType::Q8: scores<Q8Rows>(tasks, count, kv, kvh, lo, span, scale, out, rows); break;
    default: scores<StoredRows<float>>(tasks, count, kv, kvh, lo, span, scale, out, rows); break;
  }
}

void weighted_v_avx512(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                       int64_t span, const float* w, const float* inv, float* acc, float* rows) {
  switch (kv.type) {
    case KvType::Bf16: weighted_v<StoredRows<uint16_t>>(tasks, count, kv, kvh, lo, span, w, inv, acc, rows); break;
    case KvType::Q8: weighted_v<Q8Rows>(tasks, count, kv, kvh, lo, span, w, inv, acc, rows); break;
    default: weighted_v<StoredRows<float>>(tasks, count, kv, kvh, lo, span, w, inv, acc, rows); break;
  }
}

}  // namespace specula::detail
