// Fast-precision matmul kernels (AVX-512 VNNI and AVX-512 BF16). Built with AVX-512 flags; called
// only when the CPU has the instructions (matmul.cpp checks cpu_features()).
//
// Affine 4-bit and 8-bit weights: X is quantized once per call to int16 per row and quantization
// group (s = max|x| / 32767, q = round-to-nearest-even(x * 32767 / max|x|)); the codes are widened
// to 16 bits and `vpdpwssd` (AVX-512 VNNI) sums 2 products per 32-bit lane exactly. A "block" is
// the 64 packed bytes of one W row (128 codes at 4 bits, 64 at 8 bits); each lane of a block's
// integer sum belongs to one quantization group, so the float step is per lane:
//   acc += float(isum) * (scale_w[group(lane)] * s_x[group(lane)])
// and y = reduce(acc) + sum_g bias_g * (exact f32 sum of x over group g).
// Unpacking (shared by all X rows): AND / shift+AND split the nibbles, vpunpck{l,h}bw widen them;
// X is pre-permuted per call to that order (make_block_order).
//
// BF16 weights: X is split once per call into bf16 hi + lo terms; `vdpbf16ps` accumulates the
// products with both in f32 (two instructions per 32 weights and row, no widening of W).
//
// Batch invariance: as in matmul_avx512.cpp, the row kernels are templated on the number R of X
// rows they handle together and every row keeps its own accumulators updated by the same ops in
// the same order for every R; the per-call preparation of X depends only on each X row. Threads
// split N only.
//
// No standard-library templates here (see MatmulJob in matmul_kernels.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "specula/kernels/matmul_kernels.h"

namespace specula::detail {

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// How far ahead of the current block the W stream is prefetched (bytes; the following W rows are
// contiguous). Measured ~10% on the 4-bit M = 1 stream.
constexpr int64_t kPrefetchBytes = 2048;

inline float* y_at(const FastJob& job, int64_t row, int64_t n) { return job.y + row * job.ldy + n; }

// GCC spells bf16 vectors as their own vector type; these are bit casts.
inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }
inline __m512i as_si(__m512bh v) { return (__m512i)v; }

// The first n of 16 lanes (none for n <= 0).
inline __mmask16 mask16(int64_t n) {
  if (n <= 0) return 0;
  return static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u);
}

// Up to 16 scales or biases g0.. (of `count` left in the row) widened to f32, zero past the row.
// Read straight from the checkpoint rather than through a widened copy: a vector load of freshly
// stored scratch at another offset misses store forwarding and stalls the stream.
inline __m512 load_params(const uint8_t* row, DType t, int64_t g0, int64_t count) {
  const __mmask16 mask = mask16(count);
  if (t == DType::F32) return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + g0);
  const __m256i h = _mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + g0);
  return t == DType::BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                          : _mm512_cvtph_ps(h);
}

// ---- affine: preparation of X ------------------------------------------------------------------

// Where word j of a block's activations comes from (an index into the block's codes), matching
// the order the kernel unpacks codes in: vpunpck{l,h}bw of the low-nibble vector, then of the
// high-nibble vector (4-bit), or of the code bytes (8-bit). Within each 128-bit lane L, unpack-low
// takes bytes 16L..16L+7 and unpack-high bytes 16L+8..16L+15.
struct BlockOrder {
  int16_t src[128];
};

constexpr BlockOrder make_block_order(int bits) {
  BlockOrder t{};
  const int vectors = bits == 4 ? 4 : 2;
  for (int v = 0; v < vectors; ++v) {
    for (int w = 0; w < 32; ++w) {
      const int lane = w / 8, i = w % 8;
      const int byte = 16 * lane + (v % 2 == 1 ? 8 : 0) + i;
      int code = byte;
      if (bits == 4) code = 2 * byte + (v >= 2 ? 1 : 0);  // low nibble = code 2b, high = 2b+1
      t.src[32 * v + w] = static_cast<int16_t>(code);
    }
  }
  return t;
}

constexpr BlockOrder kOrder4 = make_block_order(4);
constexpr BlockOrder kOrder8 = make_block_order(8);

// Quantizes X row `r` into job.xq (block order), job.xs (per-lane activation scales) and
// job.x_group_sums. `natural` is K (rounded up to a block) int16 of per-worker scratch.
void prepare_affine_row(const FastJob& job, int64_t r, int16_t* natural) {
  const WeightMatrix& w = *job.w;
  const int64_t k = w.cols;
  const int gs = w.group_size;
  const float* x = job.x + r * job.ldx;
  float* sums = job.x_group_sums + r * job.groups_padded;
  float* group_scale = job.x_group_scales + r * job.groups_padded;
  for (int64_t g = 0; g < job.groups; ++g) {
    const float* xg = x + g * gs;
    __m512 vmax = _mm512_setzero_ps(), vsum = _mm512_setzero_ps();
    for (int j = 0; j < gs; j += 16) {
      const __m512 v = _mm512_loadu_ps(xg + j);
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(v));
      vsum = _mm512_add_ps(vsum, v);
    }
    const float amax = _mm512_reduce_max_ps(vmax);
    sums[g] = _mm512_reduce_add_ps(vsum);
    // amax == 0: every activation of the group is zero and so is its scale.
    const float inv = amax > 0.0f ? kActivationLevels / amax : 0.0f;
    group_scale[g] = amax / kActivationLevels;
    const __m512 vinv = _mm512_set1_ps(inv);
    for (int j = 0; j < gs; j += 16) {
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + j), vinv));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(natural + g * gs + j), _mm512_cvtsepi32_epi16(q));
    }
  }
  const int64_t codes = job.block_codes;
  const int64_t padded = job.blocks * codes;
  for (int64_t j = k; j < padded; ++j) natural[j] = 0;

  int16_t* xq = job.xq + r * job.ldq;
  const int16_t* order = w.bits == 4 ? kOrder4.src : kOrder8.src;
  for (int64_t b = 0; b < job.blocks; ++b) {
    const int16_t* src = natural + b * codes;
    int16_t* dst = xq + b * codes;
    for (int64_t j = 0; j < codes; ++j) dst[j] = src[order[j]];
  }

  // Lane l of block b sums codes [b*codes + (codes/4)*(l/4), + codes/4), all in one group.
  float* xs = job.xs + r * job.blocks * 16;
  for (int64_t b = 0; b < job.blocks; ++b) {
    for (int l = 0; l < 16; ++l) {
      const int64_t first = b * codes + (codes / 4) * (l / 4);
      xs[b * 16 + l] = first < k ? group_scale[first / gs] : 0.0f;
    }
  }
}

// ---- affine: row kernels -----------------------------------------------------------------------

// Lane -> group offset (relative to the block's first group) for a block of `codes` codes.
struct LaneGroups {
  alignas(64) int32_t idx[16];
};

constexpr LaneGroups make_lane_groups(int codes_per_block, int gs) {
  LaneGroups t{};
  for (int l = 0; l < 16; ++l) t.idx[l] = ((codes_per_block / 4) * (l / 4)) / gs;
  return t;
}

template <int BITS, int GS>
struct AffineLayout {
  static constexpr int kCodes = BITS == 4 ? 128 : 64;  // codes per 64-byte block
  static constexpr LaneGroups lanes = make_lane_groups(kCodes, GS);
};

// One W row against R X rows: out[r * ldo] = y[r][n]. `srow` / `brow`: the row's `groups` scales
// and biases in dtype `sd`.
template <int BITS, int GS, int R>
void affine_row(const uint8_t* wrow, int64_t full_blocks, int64_t tail_bytes, const uint8_t* srow,
                const uint8_t* brow, DType sd, int64_t groups, int64_t groups_padded,
                const int16_t* xq, int64_t ldq, const float* xs, int64_t ldxs, const float* xsum,
                float* out, int64_t ldo) {
  using L = AffineLayout<BITS, GS>;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i lane_groups = _mm512_load_si512(L::lanes.idx);
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i zero = _mm512_setzero_si512();
  const int64_t blocks = full_blocks + (tail_bytes > 0 ? 1 : 0);
  const __mmask64 tail_mask = tail_bytes > 0 ? (~0ull >> (64 - tail_bytes)) : 0;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    // The next W rows follow this one in memory: keep the stream ahead of the arithmetic.
    _mm_prefetch(reinterpret_cast<const char*>(wrow + blk * 64 + kPrefetchBytes), _MM_HINT_T0);
    const __m512i raw = blk < full_blocks ? _mm512_loadu_si512(wrow + blk * 64)
                                          : _mm512_maskz_loadu_epi8(tail_mask, wrow + blk * 64);
    const int64_t g0 = blk * L::kCodes / GS;
    const __m512 ws = _mm512_permutexvar_ps(lane_groups, load_params(srow, sd, g0, groups - g0));
    if constexpr (BITS == 4) {
      const __m512i lo = _mm512_and_si512(raw, nibble);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
      const __m512i v0 = _mm512_unpacklo_epi8(lo, zero), v1 = _mm512_unpackhi_epi8(lo, zero);
      const __m512i v2 = _mm512_unpacklo_epi8(hi, zero), v3 = _mm512_unpackhi_epi8(hi, zero);
      for (int r = 0; r < R; ++r) {
        const int16_t* xr = xq + r * ldq + blk * L::kCodes;
        __m512i isum = _mm512_dpwssd_epi32(zero, v0, _mm512_loadu_si512(xr));
        isum = _mm512_dpwssd_epi32(isum, v1, _mm512_loadu_si512(xr + 32));
        isum = _mm512_dpwssd_epi32(isum, v2, _mm512_loadu_si512(xr + 64));
        isum = _mm512_dpwssd_epi32(isum, v3, _mm512_loadu_si512(xr + 96));
        const __m512 d = _mm512_mul_ps(ws, _mm512_loadu_ps(xs + r * ldxs + blk * 16));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[r]);
      }
    } else {
      const __m512i v0 = _mm512_unpacklo_epi8(raw, zero), v1 = _mm512_unpackhi_epi8(raw, zero);
      for (int r = 0; r < R; ++r) {
        const int16_t* xr = xq + r * ldq + blk * L::kCodes;
        __m512i isum = _mm512_dpwssd_epi32(zero, v0, _mm512_loadu_si512(xr));
        isum = _mm512_dpwssd_epi32(isum, v1, _mm512_loadu_si512(xr + 32));
        const __m512 d = _mm512_mul_ps(ws, _mm512_loadu_ps(xs + r * ldxs + blk * 16));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    // Bias term: sum_g b_g * xsum_r[g] over the zero-padded group vectors.
    const float* xg = xsum + r * groups_padded;
    __m512 bacc = _mm512_setzero_ps();
    for (int64_t i = 0; i < groups_padded; i += 16) {
      bacc = _mm512_fmadd_ps(load_params(brow, sd, i, groups - i), _mm512_loadu_ps(xg + i), bacc);
    }
    out[r * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r], bacc));
  }
}

using AffineRowFn = void (*)(const uint8_t*, int64_t, int64_t, const uint8_t*, const uint8_t*, DType,
                             int64_t, int64_t, const int16_t*, int64_t, const float*, int64_t,
                             const float*, float*, int64_t);

template <int BITS, int GS>
struct AffineKernels {
  static constexpr AffineRowFn by_rows[kMatmulRowBlock] = {
      affine_row<BITS, GS, 1>, affine_row<BITS, GS, 2>, affine_row<BITS, GS, 3>,
      affine_row<BITS, GS, 4>, affine_row<BITS, GS, 5>, affine_row<BITS, GS, 6>,
      affine_row<BITS, GS, 7>, affine_row<BITS, GS, 8>};
};

template <int BITS>
const AffineRowFn* affine_kernels(int gs) {
  return gs == 32 ? AffineKernels<BITS, 32>::by_rows
         : gs == 64 ? AffineKernels<BITS, 64>::by_rows
                    : AffineKernels<BITS, 128>::by_rows;
}

// W rows [n0, n1): tiles of W rows stay in cache while the blocks of X rows stream past them
// (decode: one block of <= 8 X rows, each weight byte read once).
void affine_rows(const FastJob& job, int64_t n0, int64_t n1) {
  const WeightMatrix& w = *job.w;
  const int64_t m = job.m, ldy = job.ldy;
  const int64_t groups = job.groups;
  const int64_t gp = job.groups_padded;
  const AffineRowFn* kernels = w.bits == 4 ? affine_kernels<4>(w.group_size) : affine_kernels<8>(w.group_size);
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  const auto* biases = static_cast<const uint8_t*>(w.biases);
  const int64_t row_bytes = w.row_bytes();
  const int64_t full_blocks = row_bytes / 64;
  const int64_t tail_bytes = row_bytes % 64;
  const int64_t sb_row_bytes = groups * static_cast<int64_t>(dtype_size(w.scale_dtype));
  const int64_t ldxs = job.blocks * 16;
  const int64_t tile = m > kMatmulRowBlock ? kFastPrefillTile : kMatmulGrain;
  for (int64_t t0 = n0; t0 < n1; t0 += tile) {
    const int64_t t1 = min64(n1, t0 + tile);
    for (int64_t m0 = 0; m0 < m; m0 += kMatmulRowBlock) {
      const AffineRowFn kernel = kernels[min64(kMatmulRowBlock, m - m0) - 1];
      for (int64_t n = t0; n < t1; ++n) {
        kernel(wdata + n * row_bytes, full_blocks, tail_bytes, scales + n * sb_row_bytes,
               biases + n * sb_row_bytes, w.scale_dtype, groups, gp, job.xq + m0 * job.ldq, job.ldq,
               job.xs + m0 * ldxs, ldxs, job.x_group_sums + m0 * gp, y_at(job, m0, n), ldy);
      }
    }
  }
}

// ---- bf16 ----------------------------------------------------------------------------------------

// X row r as two bf16 terms (nearest even): hi = bf16(x), lo = bf16(x - hi), zero padded to a
// multiple of 32. hi + lo carries ~16 significant bits, so products with bf16 weights lose about
// as little as f32 accumulation does.
void prepare_bf16_row(const FastJob& job, int64_t r) {
  const int64_t k = job.w->cols;
  const float* x = job.x + r * job.ldx;
  uint16_t* hi_out = job.xb + r * 2 * job.ldb;
  uint16_t* lo_out = hi_out + job.ldb;
  for (int64_t j = 0; j < job.ldb; j += 32) {
    const __m512 x0 = _mm512_maskz_loadu_ps(mask16(k - j), x + j);
    const __m512 x1 = _mm512_maskz_loadu_ps(mask16(k - j - 16), x + j + 16);
    const __m512bh hi = _mm512_cvtne2ps_pbh(x1, x0);
    // Widen hi back to f32 (bf16 -> f32 is a 16-bit shift) for the residual.
    const __m512i hi_bits = as_si(hi);
    const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi_bits)), 16));
    const __m512 h1 =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hi_bits, 1)), 16));
    const __m512bh lo = _mm512_cvtne2ps_pbh(_mm512_sub_ps(x1, h1), _mm512_sub_ps(x0, h0));
    _mm512_storeu_si512(hi_out + j, hi_bits);
    _mm512_storeu_si512(lo_out + j, as_si(lo));
  }
}

// X rows per bf16 row kernel: four accumulators per row (vdpbf16ps has a long latency; one chain
// per product term keeps M = 1 memory-bound) fit the 32 vector registers for 4 rows.
constexpr int kBf16RowBlock = 4;

template <int R>
void bf16_row(const uint16_t* wrow, int64_t k, const uint16_t* xb, int64_t ldb, float* out, int64_t ldo) {
  __m512 hi0[R], hi1[R], lo0[R], lo1[R];
  for (int r = 0; r < R; ++r) hi0[r] = hi1[r] = lo0[r] = lo1[r] = _mm512_setzero_ps();
  int64_t j = 0;
  const char* ahead = reinterpret_cast<const char*>(wrow) + kPrefetchBytes;
  for (; j + 64 <= k; j += 64) {
    _mm_prefetch(ahead + 2 * j, _MM_HINT_T0);
    _mm_prefetch(ahead + 2 * j + 64, _MM_HINT_T0);
    const __m512bh w0 = as_bh(_mm512_loadu_si512(wrow + j));
    const __m512bh w1 = as_bh(_mm512_loadu_si512(wrow + j + 32));
    for (int r = 0; r < R; ++r) {
      const uint16_t* xh = xb + r * 2 * ldb + j;
      const uint16_t* xl = xh + ldb;
      hi0[r] = _mm512_dpbf16_ps(hi0[r], w0, as_bh(_mm512_loadu_si512(xh)));
      hi1[r] = _mm512_dpbf16_ps(hi1[r], w1, as_bh(_mm512_loadu_si512(xh + 32)));
      lo0[r] = _mm512_dpbf16_ps(lo0[r], w0, as_bh(_mm512_loadu_si512(xl)));
      lo1[r] = _mm512_dpbf16_ps(lo1[r], w1, as_bh(_mm512_loadu_si512(xl + 32)));
    }
  }
  for (; j < k; j += 32) {
    // Tail: W elements past K are masked to zero; X is zero padded to a multiple of 32.
    const int64_t left = k - j;
    const __mmask32 mask = static_cast<__mmask32>(left >= 32 ? 0xffffffffu : (1u << left) - 1u);
    const __m512bh w0 = as_bh(_mm512_maskz_loadu_epi16(mask, wrow + j));
    for (int r = 0; r < R; ++r) {
      const uint16_t* xh = xb + r * 2 * ldb + j;
      hi0[r] = _mm512_dpbf16_ps(hi0[r], w0, as_bh(_mm512_loadu_si512(xh)));
      lo0[r] = _mm512_dpbf16_ps(lo0[r], w0, as_bh(_mm512_loadu_si512(xh + ldb)));
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(hi0[r], hi1[r]), _mm512_add_ps(lo0[r], lo1[r])));
  }
}

using Bf16RowFn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, float*, int64_t);

void bf16_rows(const FastJob& job, int64_t n0, int64_t n1) {
  static constexpr Bf16RowFn kernels[kBf16RowBlock] = {bf16_row<1>, bf16_row<2>, bf16_row<3>, bf16_row<4>};
  const WeightMatrix& w = *job.w;
  const int64_t m = job.m, k = w.cols;
  const auto* wdata = static_cast<const uint16_t*>(w.data);
  const int64_t tile = m > kMatmulRowBlock ? kFastPrefillTile : kMatmulGrain;
  for (int64_t t0 = n0; t0 < n1; t0 += tile) {
    const int64_t t1 = min64(n1, t0 + tile);
    for (int64_t m0 = 0; m0 < m; m0 += kBf16RowBlock) {
      const Bf16RowFn kernel = kernels[min64(kBf16RowBlock, m - m0) - 1];
      for (int64_t n = t0; n < t1; ++n) {
        kernel(wdata + n * k, k, job.xb + m0 * 2 * job.ldb, job.ldb, y_at(job, m0, n), job.ldy);
      }
    }
  }
}

}  // namespace

void matmul_fast_avx512_prepare(const FastJob& job, int worker, int64_t r0, int64_t r1) {
  if (job.w->format == WeightFormat::BF16) {
    for (int64_t r = r0; r < r1; ++r) prepare_bf16_row(job, r);
    return;
  }
  int16_t* natural = job.worker_natural + static_cast<int64_t>(worker) * job.blocks * job.block_codes;
  for (int64_t r = r0; r < r1; ++r) prepare_affine_row(job, r, natural);
}

void matmul_fast_avx512_rows(const FastJob& job, int /*worker*/, int64_t n0, int64_t n1) {
  if (job.w->format == WeightFormat::BF16) {
    bf16_rows(job, n0, n1);
  } else {
    affine_rows(job, n0, n1);
  }
}

}  // namespace specula::detail
