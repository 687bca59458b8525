// attend_heads() with AVX-512: the same operations in the same order as the portable code in
// attention.cpp, so the bytes are the same. One zmm holds attention_dot's 16 partial sums (lane i
// is part[i]; a separate multiply and add, never an FMA: this file is built with
// -ffp-contract=off) and is folded in its order; the weighted V sum is lane-wise anyway.
//
// Why it is faster: the portable loops read the K and V rows once per task, keep the V
// accumulators in memory and run one dependent chain of adds per score. Here every K and V row is
// read once for all the tasks (a GQA group's heads, and the rows of a verify chunk), several keys'
// dot products run side by side (independent chains), a slice of the V accumulators of up to 4
// tasks stays in registers over a block of keys, and the rows ahead are prefetched (the V rows of
// the next block spread over the current block's work, so the misses overlap it). Rows of f32 and
// bf16 stores alike: a bf16 vector is widened exactly as it is loaded.
#include <immintrin.h>

#include "specula/kernels/attention.h"
#include "specula/kernels/attention_kernels.h"

namespace specula::detail {
namespace {

constexpr int64_t kLanes = 16;
constexpr int kKeysAtOnce = 8;         // independent dot-product chains per query head
constexpr int kHeadsAtOnce = 4;        // V accumulators of this many tasks ...
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

// The K or V rows of consecutive positions (KvStoreView::k_row / v_row without a division per
// key): the physical row advances by one, wrapping at the ring's end or moving to the next block.
// T: the store's element (float, or uint16_t for bf16).
template <typename T>
class RowWalker {
 public:
  RowWalker(const void* const* blocks, const KvStoreView& kv, int64_t pos)
      : blocks_(blocks), wrap_(kv.wrap), block_rows_(kv.block_rows), stride_(kv.kv_heads * kv.head_dim) {
    r_ = wrap_ > 0 ? pos % wrap_ : pos;
    b_ = r_ / block_rows_;
    o_ = r_ % block_rows_;
  }
  const T* row() const { return static_cast<const T*>(blocks_[b_]) + o_ * stride_; }
  void next() {
    ++r_;
    ++o_;
    if (wrap_ > 0 && r_ == wrap_) {
      r_ = b_ = o_ = 0;
    } else if (o_ == block_rows_) {
      ++b_;
      o_ = 0;
    }
  }

 private:
  const void* const* blocks_;
  int64_t wrap_, block_rows_, stride_;
  int64_t r_ = 0, b_ = 0, o_ = 0;
};

// Prefetches the head's part of the K or V rows `distance` keys ahead of the ones being read:
// consecutive positions are rows a full row stride apart (all KV heads), which the hardware
// prefetchers follow poorly, and one core alone would otherwise wait on every row.
template <typename T>
class RowPrefetcher {
 public:
  RowPrefetcher(const void* const* blocks, const KvStoreView& kv, int64_t first_key, int64_t n, int64_t kvh,
                int64_t distance)
      : walk_(blocks, kv, first_key),
        bytes_(kv.head_dim * static_cast<int64_t>(sizeof(T))),
        offset_(kvh * kv.head_dim),
        left_(n) {
    for (int64_t i = 0; i < distance && left_ > 0; ++i) advance();
  }
  // Prefetches the next row.
  void advance() {
    if (left_ <= 0) return;
    const char* p = reinterpret_cast<const char*>(walk_.row() + offset_);
    for (int64_t b = 0; b < bytes_; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
    walk_.next();
    --left_;
  }

 private:
  RowWalker<T> walk_;
  int64_t bytes_, offset_, left_;
};

// The head's part of the K or V rows of keys [lo, lo + span), handed out block by block.
template <typename T>
class KeyRows {
 public:
  KeyRows(const void* const* blocks, const KvStoreView& kv, int64_t lo, int64_t kvh)
      : walk_(blocks, kv, lo), offset_(kvh * kv.head_dim) {}
  // Fills rows[0, keys) with the next `keys` keys' rows.
  void next(int keys, const T** rows) {
    for (int r = 0; r < keys; ++r, walk_.next()) rows[r] = walk_.row() + offset_;
  }

 private:
  RowWalker<T> walk_;
  int64_t offset_;
};

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

// Scores of one query head for keys [t0, t0 + KEYS): KEYS independent attention_dot chains.
template <int KEYS, typename T>
inline void dot_keys(const float* q, const T* const* k, int64_t d, float scale, float* out) {
  __m512 acc[KEYS];
  for (int r = 0; r < KEYS; ++r) acc[r] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + kLanes <= d; j += kLanes) {
    const __m512 qv = _mm512_loadu_ps(q + j);
    for (int r = 0; r < KEYS; ++r) acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(qv, load16(k[r] + j)));
  }
  if (j < d) {  // the tail goes into part[0 .. d - j), as in attention_dot
    const __mmask16 m = static_cast<__mmask16>((1u << (d - j)) - 1);
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + j);
    for (int r = 0; r < KEYS; ++r)
      acc[r] = _mm512_mask_add_ps(acc[r], m, acc[r], _mm512_mul_ps(qv, load16(k[r] + j, m)));
  }
  for (int r = 0; r < KEYS; ++r) out[r] = fold16(acc[r]) * scale;
}

// For the HEADS tasks of one register block: acc[i][c0 .. c0 + 16 * nvec) += w_i(u) * V row u
// over the keys u0 + r (r < keys) of one block, ascending, each task only over its own keys
// [begin[i], end[i]) (masked adds: the other keys change nothing). The slice of acc stays in
// registers over the block; `last` masks the slice's last vector.
template <int HEADS, typename T>
void weighted_v_block(const T* const* rows, int keys, int64_t u0, const float* w, int64_t span, const int64_t* begin,
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
      for (int v = 0; v < kVecsAtOnce; ++v)
        a[i][v] = _mm512_mask_add_ps(a[i][v], in, a[i][v], _mm512_mul_ps(wi, vv[v]));
    }
  }
  for (int i = 0; i < HEADS; ++i)
    for (int v = 0; v < kVecsAtOnce; ++v) _mm512_mask_storeu_ps(acc + i * d + c0 + v * kLanes, mask[v], a[i][v]);
}

template <typename T>
void scores(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
            float scale, float* scores) {
  const int64_t d = kv.head_dim;
  // Tasks in the inner loop: each block of K rows is read from memory once for all of them.
  KeyRows<T> key_rows(kv.k_blocks, kv, lo, kvh);
  RowPrefetcher<T> ahead(kv.k_blocks, kv, lo, span, kvh, kPrefetchKeys);
  const T* k[kKeysAtOnce];
  for (int64_t u = 0; u < span; u += kKeysAtOnce) {
    const int keys = static_cast<int>(min_i64(kKeysAtOnce, span - u));
    key_rows.next(keys, k);
    for (int r = 0; r < keys; ++r) ahead.advance();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t b = tasks[i].first_key - lo;
      const int64_t e = b + tasks[i].n;
      float* si = scores + i * span;
      if (keys == kKeysAtOnce && u >= b && u + kKeysAtOnce <= e) {
        dot_keys<kKeysAtOnce>(tasks[i].q, k, d, scale, si + u);
      } else {
        for (int r = 0; r < keys; ++r) {
          if (u + r >= b && u + r < e) dot_keys<1>(tasks[i].q, k + r, d, scale, si + u + r);
        }
      }
    }
  }
}

template <typename T>
void weighted_v(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo, int64_t span,
                const float* w, const float* inv, float* acc) {
  const int64_t d = kv.head_dim;
  for (int64_t j = 0; j < count * d; ++j) acc[j] = 0.0f;
  int64_t begin[kHeadsAtOnce], end[kHeadsAtOnce];
  // Keys in blocks whose V rows stay in L1/L2 while every (tasks, 64 dims) slice of them is summed:
  // each V row comes from memory once. The next block's rows are prefetched a few at a time
  // between the slices, so that their misses overlap this block's arithmetic.
  KeyRows<T> value_rows(kv.v_blocks, kv, lo, kvh);
  RowPrefetcher<T> ahead(kv.v_blocks, kv, lo, span, kvh, kKeyBlock);
  const int64_t slices =
      (count + kHeadsAtOnce - 1) / kHeadsAtOnce * ((d + kVecsAtOnce * kLanes - 1) / (kVecsAtOnce * kLanes));
  const T* rows[kKeyBlock];
  for (int64_t u0 = 0; u0 < span; u0 += kKeyBlock) {
    const int keys = static_cast<int>(min_i64(kKeyBlock, span - u0));
    value_rows.next(keys, rows);
    int64_t slice = 0, fetched = 0;  // the next block's rows prefetched so far
    for (int64_t h0 = 0; h0 < count; h0 += kHeadsAtOnce) {
      const int heads = static_cast<int>(min_i64(kHeadsAtOnce, count - h0));
      for (int i = 0; i < heads; ++i) {
        begin[i] = tasks[h0 + i].first_key - lo;
        end[i] = begin[i] + tasks[h0 + i].n;
      }
      const float* wh = w + h0 * span;
      float* ah = acc + h0 * d;
      for (int64_t c0 = 0; c0 < d; c0 += kVecsAtOnce * kLanes) {
        for (const int64_t due = ++slice * kKeyBlock / slices; fetched < due; ++fetched) ahead.advance();
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

}  // namespace

void attention_scores_avx512(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                             int64_t span, float scale, float* out) {
  if (kv.type == KvType::Bf16) {
    scores<uint16_t>(tasks, count, kv, kvh, lo, span, scale, out);
  } else {
    scores<float>(tasks, count, kv, kvh, lo, span, scale, out);
  }
}

void weighted_v_avx512(const HeadTask* tasks, int64_t count, const KvStoreView& kv, int64_t kvh, int64_t lo,
                       int64_t span, const float* w, const float* inv, float* acc) {
  if (kv.type == KvType::Bf16) {
    weighted_v<uint16_t>(tasks, count, kv, kvh, lo, span, w, inv, acc);
  } else {
    weighted_v<float>(tasks, count, kv, kvh, lo, span, w, inv, acc);
  }
}

}  // namespace specula::detail
