// Fast-precision matmul kernels (AVX-512 VNNI and AVX-512 BF16). Built with AVX-512 flags; called
// only when the CPU has the instructions (matmul.cpp checks cpu_features()).
//
// Affine weights as 4-, 6- or 8-bit codes, in the packed layout of kernels/packed_affine.h (16 W
// rows side by side; 6-bit codes are rebuilt from a nibble and two top bits): X is quantized once per call to int16 per
// row and quantization group (s = max|x| / 32767, q = round-to-nearest-even(x * 32767 / max|x|)); each 32-byte chunk of
// codes is widened to 16-bit words and `vpdpwssd` (AVX-512 VNNI) multiplies them with a broadcast pair of activations,
// so lane j sums exactly for W row j. At the end of a group, one vector operation per X row applies the 16 rows' scales
// and biases:
//   acc = fma(float(isum), scale_w * s_x, acc);  acc = fma(bias_w, s_x * sum(q over the group), acc)
// and the 16 results are stored without a reduction. The bias term sums the quantized activations,
// not x: the result is then the product of the dequantized weights with the quantized activations,
// whose rounding error is multiplied by the weights (centred on zero) rather than by the unsigned
// codes alone (centred on half their range), about half the error (docs/architecture.md §3).
//
// Precision::Int8 quantizes X the same way to int8 (127 levels) and multiplies 4 inputs per
// instruction (`vpdpbusd`, the codes as its unsigned bytes): twice the multiply-adds per
// instruction, for verifies and prefill that are bound by multiplies rather than by memory.
//
// BF16 weights: X is split once per call into bf16 hi + lo terms; `vdpbf16ps` accumulates the
// products with both in f32 (two instructions per 32 weights and row, no widening of W).
//
// Batch invariance: as in matmul_avx512.cpp, the kernels are templated on the number R of X
// rows they handle together and every row keeps its own accumulators updated by the same ops in
// the same order for every R; the per-call preparation of X depends only on each X row. Threads
// split N only.
//
// No standard-library templates here (see MatmulJob in matmul_kernels.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "specula/kernels/matmul_kernels.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/packed_header_walk.h"
#include "specula/kernels/unroll.h"

namespace specula::detail {

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// How far ahead of the current block the W stream is prefetched (bytes; the following W rows are
// contiguous). bf16 rows: 2048 (it gained ~10% on the 4-bit M = 1 stream when both used it).
// Packed affine blocks: 8192 made the E4B LM head and MLP shapes at M = 2 and 4 rows 10-20% faster
// than 2048 (bench_matmul, 2 threads, weights from DRAM), M = 1 no slower.
constexpr int64_t kPrefetchBytes = 2048;
constexpr int64_t kAffinePrefetchBytes = 8192;

inline float* y_at(const FastJob& job, int64_t row, int64_t n) { return job.y + row * job.ldy + n; }

// GCC spells bf16 vectors as their own vector type; these are bit casts.
inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }
inline __m512i as_si(__m512bh v) { return (__m512i)v; }

// The first n of 16 lanes (none for n <= 0).
inline __mmask16 mask16(int64_t n) {
  if (n <= 0) return 0;
  return static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u);
}

// ---- affine: preparation of X ------------------------------------------------------------------

// Quantizes X row `r` into job.xq (int16) or job.xq8 (int8, when set), natural order, and
// job.x_group_scales and job.x_group_sums (the scale times the sum of the group's codes).
void prepare_affine_row(const FastJob& job, int64_t r) {
  const WeightMatrix& w = *job.w;
  const int gs = w.group_size;
  const float* x = job.x + r * job.ldx;
  const bool int8 = job.xq8 != nullptr;
  const float levels = int8 ? kActivationLevels8 : kActivationLevels;
  int16_t* xq = int8 ? nullptr : job.xq + r * w.cols;
  int8_t* xq8 = int8 ? job.xq8 + r * w.cols : nullptr;
  float* sums = job.x_group_sums + r * job.groups;
  float* group_scale = job.x_group_scales + r * job.groups;
  for (int64_t g = 0; g < job.groups; ++g) {
    const float* xg = x + g * gs;
    __m512 vmax = _mm512_setzero_ps();
    for (int j = 0; j < gs; j += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(xg + j)));
    const float amax = _mm512_reduce_max_ps(vmax);
    // amax == 0: every activation of the group is zero and so is its scale.
    const float inv = amax > 0.0f ? levels / amax : 0.0f;
    group_scale[g] = amax / levels;
    const __m512 vinv = _mm512_set1_ps(inv);
    __m512i qsum = _mm512_setzero_si512();
    for (int j = 0; j < gs; j += 16) {
      // |x| * levels / amax <= levels: the codes never saturate, so qsum sums the stored codes.
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + j), vinv));
      qsum = _mm512_add_epi32(qsum, q);
      if (int8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(xq8 + g * gs + j), _mm512_cvtsepi32_epi8(q));
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + g * gs + j), _mm512_cvtsepi32_epi16(q));
      }
    }
    sums[g] = group_scale[g] * static_cast<float>(_mm512_reduce_add_epi32(qsum));
  }
}

// ---- affine: block kernels ---------------------------------------------------------------------

// acc += w * (the pair of activations (x[0], x[1]) in every 32-bit lane), as one `vpdpwssd` with
// the pair as an embedded-broadcast memory operand. GCC 12 emits a separate `vpbroadcastd` for
// _mm512_dpwssd_epi32(acc, w, _mm512_set1_epi32(..)), one extra instruction per multiply: the
// kernels ran 4-20 % slower with it (bench_matmul; docs/performance.md).
typedef int32_t __attribute__((may_alias)) PairBits;
inline __m512i dpwssd_pair(__m512i acc, __m512i w, const int16_t* x) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const PairBits*>(x)));
  return acc;
}

// 16 scales or biases of a packed group widened to f32.
inline __m512 load_group_params(const uint8_t* p, DType t) {
  if (t == DType::F32) return _mm512_loadu_ps(p);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return t == DType::BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

// 16 int8 multipliers widened to f32.
inline __m512 int8_lanes(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// The 16 W rows' scales and biases of the group whose parameters start at p (`bytes` each);
// returns their end. Shared factors give factor * multiplier, the stored value bit for bit.
template <bool SHARED>
inline const uint8_t* group_params(const uint8_t* p, DType dtype, int64_t bytes, const HeaderWalk& walk, __m512& scales,
                                   __m512& biases) {
  if constexpr (SHARED) {
    scales = _mm512_mul_ps(_mm512_loadu_ps(walk.header), int8_lanes(p));
    biases = _mm512_mul_ps(_mm512_loadu_ps(walk.header + 4 * kPackedRows), int8_lanes(p + bytes));
  } else {
    scales = load_group_params(p, dtype);
    biases = load_group_params(p + bytes, dtype);
  }
  return p + 2 * bytes;
}

// The W stream ahead of a 6-bit chunk triple (96 bytes: two 64-byte lines at most).
inline void prefetch_six_bit_chunks(const uint8_t* three) {
  _mm_prefetch(reinterpret_cast<const char*>(three + kAffinePrefetchBytes), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(three + 64 + kAffinePrefetchBytes), _MM_HINT_T0);
}

// One packed block (16 W rows) against R X rows: y[r * ldy + j] for the `valid` lanes j.
// SHARED: the block's parameters are shared factors (GGUF K-quants; a variant of its own so that
// the per-group layout's kernels stay as they are).
// Per row and group, the integer sums of kChains independent chains (vpdpwssd has a latency of
// several cycles; integer addition makes their split irrelevant to the result) are combined, and
//   acc = fma(float(isum), scale * s_x, acc);  acc = fma(bias, sum(x), acc)
// in group order: the same operations for every R, so every row's bytes are batch invariant.
template <int BITS, int GS, int R, bool SHARED>
void affine_block(const uint8_t* p, int64_t groups, PackedParams pp, const int16_t* xq, int64_t ldq,
                  const float* xscale, const float* xsum, int64_t ldg, float* y, int64_t ldy, __mmask16 valid) {
  constexpr int kChunks = BITS == 8 ? GS / 2 : GS / 4;  // 32-byte chunks of codes (6-bit: of low nibbles)
  constexpr int kCodeBytes = 2 * GS * BITS;             // per group: 16 rows x GS codes
  constexpr int kChains = R <= 2 ? 4 : 2;
  constexpr int kStep = BITS == 4 ? kChains / 2 : kChains;  // chunks per inner iteration (4/8-bit)
  const __m512i low_nibbles = _mm512_set1_epi16(0x000f);
  const __m512i top_bits = _mm512_set1_epi16(0x0030);
  const int64_t pbytes = param_bytes<SHARED>(pp);
  HeaderWalk walk;
  __m512 acc[R];
  SPECULA_UNROLL(8)
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    if constexpr (SHARED) p = enter_group(p, pp, walk);
    __m512i isum[R][kChains];
    SPECULA_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      SPECULA_UNROLL(4)
      for (int c = 0; c < kChains; ++c) isum[r][c] = _mm512_setzero_si512();
    }
    // One pointer per X row, hidden from the optimizer: otherwise GCC hoists every (row, chunk)
    // address of the unrolled loop out of the group loop and reloads them from spill slots.
    const int16_t* xr[R];
    SPECULA_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      xr[r] = xq + r * ldq + g * GS;
      asm("" : "+r"(xr[r]));
    }
    if constexpr (BITS == 6) {
      // Per 8 inputs, two chunks of low nibbles and one of the top bits (kernels/packed_affine.h):
      // each code is its nibble | top bits << 4, rebuilt in the 16-bit words `vpdpwssd` reads.
      SPECULA_UNROLL(16)
      for (int c = 0; c < kChunks; c += 2) {
        const uint8_t* three = p + c / 2 * 96;
        prefetch_six_bit_chunks(three);
        const __m512i top = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(three + 64)));
        SPECULA_UNROLL(2)
        for (int u = 0; u < 2; ++u) {
          const __m512i raw =
              _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(three + 32 * u)));
          // Top bits of the low nibbles' codes (inputs k, k+1): bits 0-1 (u = 0) or 4-5 (u = 1) of
          // `top`; of the high nibbles' (k+2, k+3): bits 2-3 or 6-7. 0xF8 is a | (b & c).
          const __m512i lo_top = u == 0 ? _mm512_slli_epi16(top, 4) : top;
          const __m512i hi_top = u == 0 ? _mm512_slli_epi16(top, 2) : _mm512_srli_epi16(top, 2);
          const __m512i lo = _mm512_ternarylogic_epi32(_mm512_and_si512(raw, low_nibbles), lo_top, top_bits, 0xF8);
          const __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(raw, 4), hi_top, top_bits, 0xF8);
          SPECULA_UNROLL(8)
          for (int r = 0; r < R; ++r) {
            const int16_t* x = xr[r] + 4 * (c + u);
            isum[r][(2 * u) % kChains] = dpwssd_pair(isum[r][(2 * u) % kChains], lo, x);
            isum[r][(2 * u + 1) % kChains] = dpwssd_pair(isum[r][(2 * u + 1) % kChains], hi, x + 2);
          }
        }
      }
    } else {
      SPECULA_UNROLL(32)
      for (int c = 0; c < kChunks; c += kStep) {
        if (c % 2 == 0)  // once per 64-byte line
          _mm_prefetch(reinterpret_cast<const char*>(p + c * 32 + kAffinePrefetchBytes), _MM_HINT_T0);
        SPECULA_UNROLL(4)
        for (int u = 0; u < kStep; ++u) {
          const __m512i raw =
              _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + (c + u) * 32)));
          if constexpr (BITS == 4) {
            const __m512i lo = _mm512_and_si512(raw, low_nibbles);  // inputs k, k+1
            const __m512i hi = _mm512_srli_epi16(raw, 4);           // inputs k+2, k+3
            SPECULA_UNROLL(8)
            for (int r = 0; r < R; ++r) {
              const int16_t* x = xr[r] + 4 * (c + u);
              isum[r][2 * u] = dpwssd_pair(isum[r][2 * u], lo, x);
              isum[r][2 * u + 1] = dpwssd_pair(isum[r][2 * u + 1], hi, x + 2);
            }
          } else {
            SPECULA_UNROLL(8)
            for (int r = 0; r < R; ++r) {
              isum[r][u] = dpwssd_pair(isum[r][u], raw, xr[r] + 2 * (c + u));
            }
          }
        }
      }
    }
    __m512 scales, biases;
    p = group_params<SHARED>(p + kCodeBytes, pp.dtype, pbytes, walk, scales, biases);
    SPECULA_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      __m512i total = isum[r][0];
      SPECULA_UNROLL(4)
      for (int c = 1; c < kChains; ++c) total = _mm512_add_epi32(total, isum[r][c]);
      const __m512 d = _mm512_mul_ps(scales, _mm512_set1_ps(xscale[r * ldg + g]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), d, acc[r]);
      acc[r] = _mm512_fmadd_ps(biases, _mm512_set1_ps(xsum[r * ldg + g]), acc[r]);
    }
  }
  SPECULA_UNROLL(8)
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy, valid, acc[r]);
}

using AffineBlockFn = void (*)(const uint8_t*, int64_t, PackedParams, const int16_t*, int64_t, const float*,
                               const float*, int64_t, float*, int64_t, __mmask16);

template <int BITS, int GS, bool SHARED = false>
struct AffineKernels {
  static constexpr AffineBlockFn by_rows[kMatmulRowBlock] = {
      affine_block<BITS, GS, 1, SHARED>, affine_block<BITS, GS, 2, SHARED>, affine_block<BITS, GS, 3, SHARED>,
      affine_block<BITS, GS, 4, SHARED>, affine_block<BITS, GS, 5, SHARED>, affine_block<BITS, GS, 6, SHARED>,
      affine_block<BITS, GS, 7, SHARED>, affine_block<BITS, GS, 8, SHARED>};
};

template <int BITS>
const AffineBlockFn* affine_kernels(int gs, bool shared) {
  // The shared-factor formats: Q4_K (4-bit groups of 32), Q5_K (groups of 32) and Q6_K (groups of
  // 16), the last two in 6- or 8-bit codes.
  if constexpr (BITS == 4) {
    if (shared) return AffineKernels<4, 32, true>::by_rows;
  } else if constexpr (BITS == 6) {
    if (shared) return gs == 16 ? AffineKernels<6, 16, true>::by_rows : AffineKernels<6, 32, true>::by_rows;
    if (gs == 16) return AffineKernels<6, 16>::by_rows;
  } else {
    if (shared) return gs == 16 ? AffineKernels<8, 16, true>::by_rows : AffineKernels<8, 32, true>::by_rows;
    if (gs == 16) return AffineKernels<8, 16>::by_rows;
  }
  return gs == 32   ? AffineKernels<BITS, 32>::by_rows
         : gs == 64 ? AffineKernels<BITS, 64>::by_rows
                    : AffineKernels<BITS, 128>::by_rows;
}

// ---- affine, int8 activations (Precision::Int8) ----------------------------------------------

// acc += w * (the quad of activations x[0..3] in every 32-bit lane): one `vpdpbusd`, W as the
// unsigned bytes, the quad as an embedded-broadcast signed memory operand (see dpwssd_pair).
typedef int32_t __attribute__((may_alias)) QuadBits;
inline __m512i dpbusd_quad(__m512i acc, __m512i w, const int8_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const QuadBits*>(x)));
  return acc;
}

// The 16 W rows' codes for 4 consecutive inputs, one row per 32-bit lane, bytes in input order.
// A 32-byte chunk holds, for row j, bytes 2j and 2j + 1: low nibbles inputs k, k + 1, high
// nibbles k + 2, k + 3 (4-bit); 8-bit codes take two chunks, inputs k, k + 1 then k + 2, k + 3.
template <int BITS>
inline __m512i quad_codes(const uint8_t* p) {
  const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  if constexpr (BITS == 4) {
    // (v | v << 12) & 0x0f0f0f0f: bytes lo(2j), lo(2j + 1), hi(2j), hi(2j + 1).
    return _mm512_ternarylogic_epi32(v, _mm512_slli_epi32(v, 12), _mm512_set1_epi32(0x0f0f0f0f), 0xA8);
  } else {
    const __m512i v1 = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
    return _mm512_or_si512(v, _mm512_slli_epi32(v1, 16));
  }
}

// 6-bit codes: the quads of inputs k..k+3 and k+4..k+7 from their two chunks of low nibbles and
// the chunk of top bits that follows them (kernels/packed_affine.h).
inline void six_bit_quads(const uint8_t* three, __m512i& first, __m512i& second) {
  const __m512i top = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(three + 64)));
  const __m512i top_bits = _mm512_set1_epi32(0x30303030);
  // Lane j of `top` holds bytes 2j, 2j+1 of the top-bit chunk; the first quad's codes take their
  // bits 0-1 (inputs k, k+1 in bytes 0 and 1 of the lane) and 2-3 (k+2, k+3 in bytes 2 and 3),
  // the second quad's bits 4-5 and 6-7; each lands in bits 4-5 of its code's byte.
  // 0xA8 is (a | b) & c.
  const __m512i first_top =
      _mm512_ternarylogic_epi32(_mm512_slli_epi32(top, 4), _mm512_slli_epi32(top, 18), top_bits, 0xA8);
  const __m512i second_top = _mm512_ternarylogic_epi32(top, _mm512_slli_epi32(top, 14), top_bits, 0xA8);
  first = _mm512_or_si512(quad_codes<4>(three), first_top);
  second = _mm512_or_si512(quad_codes<4>(three + 32), second_top);
}

// As affine_block, with int8 activations: one `vpdpbusd` per 4 inputs and X row instead of two
// `vpdpwssd`. The same per-group combination in the same order for every R.
template <int BITS, int GS, int R, bool SHARED>
void affine_block_i8(const uint8_t* p, int64_t groups, PackedParams pp, const int8_t* xq, int64_t ldq,
                     const float* xscale, const float* xsum, int64_t ldg, float* y, int64_t ldy, __mmask16 valid) {
  constexpr int kQuadBytes = BITS == 4 ? 32 : 64;  // packed bytes of 4 inputs x 16 W rows (4/8-bit)
  constexpr int kCodeBytes = 2 * GS * BITS;        // per group: 16 rows x GS codes
  constexpr int kQuads = GS / 4;
  constexpr int kChains = R <= 2 ? 4 : 2;
  const int64_t pbytes = param_bytes<SHARED>(pp);
  HeaderWalk walk;
  __m512 acc[R];
  SPECULA_UNROLL(8)
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    if constexpr (SHARED) p = enter_group(p, pp, walk);
    __m512i isum[R][kChains];
    SPECULA_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      SPECULA_UNROLL(4)
      for (int c = 0; c < kChains; ++c) isum[r][c] = _mm512_setzero_si512();
    }
    const int8_t* xr[R];
    SPECULA_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      xr[r] = xq + r * ldq + g * GS;
      asm("" : "+r"(xr[r]));
    }
    if constexpr (BITS == 6) {
      SPECULA_UNROLL(16)
      for (int q = 0; q < kQuads; q += 2) {
        const uint8_t* three = p + q / 2 * 96;
        prefetch_six_bit_chunks(three);
        __m512i first, second;
        six_bit_quads(three, first, second);
        SPECULA_UNROLL(8)
        for (int r = 0; r < R; ++r) {
          isum[r][q % kChains] = dpbusd_quad(isum[r][q % kChains], first, xr[r] + 4 * q);
          isum[r][(q + 1) % kChains] = dpbusd_quad(isum[r][(q + 1) % kChains], second, xr[r] + 4 * (q + 1));
        }
      }
    } else {
      SPECULA_UNROLL(32)
      for (int q = 0; q < kQuads; q += kChains) {
        SPECULA_UNROLL(4)
        for (int u = 0; u < kChains; ++u) {
          const uint8_t* wq = p + (q + u) * kQuadBytes;
          if (BITS == 8 || (q + u) % 2 == 0)  // once per 64-byte line
            _mm_prefetch(reinterpret_cast<const char*>(wq + kAffinePrefetchBytes), _MM_HINT_T0);
          const __m512i codes = quad_codes<BITS>(wq);
          SPECULA_UNROLL(8)
          for (int r = 0; r < R; ++r) isum[r][u] = dpbusd_quad(isum[r][u], codes, xr[r] + 4 * (q + u));
        }
      }
    }
    __m512 scales, biases;
    p = group_params<SHARED>(p + kCodeBytes, pp.dtype, pbytes, walk, scales, biases);
    SPECULA_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      __m512i total = isum[r][0];
      SPECULA_UNROLL(4)
      for (int c = 1; c < kChains; ++c) total = _mm512_add_epi32(total, isum[r][c]);
      const __m512 d = _mm512_mul_ps(scales, _mm512_set1_ps(xscale[r * ldg + g]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), d, acc[r]);
      acc[r] = _mm512_fmadd_ps(biases, _mm512_set1_ps(xsum[r * ldg + g]), acc[r]);
    }
  }
  SPECULA_UNROLL(8)
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy, valid, acc[r]);
}

using AffineBlockI8Fn = void (*)(const uint8_t*, int64_t, PackedParams, const int8_t*, int64_t, const float*,
                                 const float*, int64_t, float*, int64_t, __mmask16);

template <int BITS, int GS, bool SHARED = false>
struct AffineKernelsI8 {
  static constexpr AffineBlockI8Fn by_rows[kMatmulRowBlock] = {
      affine_block_i8<BITS, GS, 1, SHARED>, affine_block_i8<BITS, GS, 2, SHARED>, affine_block_i8<BITS, GS, 3, SHARED>,
      affine_block_i8<BITS, GS, 4, SHARED>, affine_block_i8<BITS, GS, 5, SHARED>, affine_block_i8<BITS, GS, 6, SHARED>,
      affine_block_i8<BITS, GS, 7, SHARED>, affine_block_i8<BITS, GS, 8, SHARED>};
};

template <int BITS>
const AffineBlockI8Fn* affine_kernels_i8(int gs, bool shared) {
  if constexpr (BITS == 4) {
    if (shared) return AffineKernelsI8<4, 32, true>::by_rows;
  } else if constexpr (BITS == 6) {
    if (shared) return gs == 16 ? AffineKernelsI8<6, 16, true>::by_rows : AffineKernelsI8<6, 32, true>::by_rows;
    if (gs == 16) return AffineKernelsI8<6, 16>::by_rows;
  } else {
    if (shared) return gs == 16 ? AffineKernelsI8<8, 16, true>::by_rows : AffineKernelsI8<8, 32, true>::by_rows;
    if (gs == 16) return AffineKernelsI8<8, 16>::by_rows;
  }
  return gs == 32   ? AffineKernelsI8<BITS, 32>::by_rows
         : gs == 64 ? AffineKernelsI8<BITS, 64>::by_rows
                    : AffineKernelsI8<BITS, 128>::by_rows;
}

// Packed blocks [b0, b1): decode (M <= 8) streams each block once for all X rows; prefill takes
// the X rows in L2-sized passes and runs each block, from L1, over the pass in groups of 8 rows.
void affine_blocks(const FastJob& job, int64_t b0, int64_t b1) {
  const WeightMatrix& w = *job.w;
  const int64_t m = job.m, k = w.cols;
  const bool int8 = job.xq8 != nullptr;
  const bool shared = job.params.superblock_groups > 0;
  const int code_bits = packed_code_bits(w);
  const AffineBlockFn* kernels = code_bits == 4   ? affine_kernels<4>(w.group_size, shared)
                                 : code_bits == 6 ? affine_kernels<6>(w.group_size, shared)
                                                  : affine_kernels<8>(w.group_size, shared);
  const AffineBlockI8Fn* kernels_i8 = code_bits == 4   ? affine_kernels_i8<4>(w.group_size, shared)
                                      : code_bits == 6 ? affine_kernels_i8<6>(w.group_size, shared)
                                                       : affine_kernels_i8<8>(w.group_size, shared);
  const int64_t block_bytes = job.block_bytes;
  int64_t pass = kFastPrefillBytes / ((int8 ? 1 : 2) * k) / kMatmulRowBlock * kMatmulRowBlock;
  if (pass < kMatmulRowBlock) pass = kMatmulRowBlock;
  for (int64_t m0 = 0; m0 < m; m0 += pass) {
    const int64_t m1 = min64(m, m0 + pass);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * 16;
      const __mmask16 valid = mask16(w.rows - n0);
      for (int64_t r0 = m0; r0 < m1; r0 += kMatmulRowBlock) {
        const int64_t rows = min64(kMatmulRowBlock, m1 - r0);
        const uint8_t* block = job.packed + b * block_bytes;
        const float* xscale = job.x_group_scales + r0 * job.groups;
        const float* xsum = job.x_group_sums + r0 * job.groups;
        if (int8) {
          kernels_i8[rows - 1](block, job.groups, job.params, job.xq8 + r0 * k, k, xscale, xsum, job.groups,
                               y_at(job, r0, n0), job.ldy, valid);
        } else {
          kernels[rows - 1](block, job.groups, job.params, job.xq + r0 * k, k, xscale, xsum, job.groups,
                            y_at(job, r0, n0), job.ldy, valid);
        }
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
    const __m512 h0 =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi_bits)), 16));
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

// W rows kept hot while the X row blocks of a prefill stream past them.
constexpr int64_t kBf16PrefillTile = 64;

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
  const int64_t tile = m > kMatmulRowBlock ? kBf16PrefillTile : kMatmulGrain;
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

void matmul_fast_avx512_prepare(const FastJob& job, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    if (job.w->format == WeightFormat::BF16) {
      prepare_bf16_row(job, r);
    } else {
      prepare_affine_row(job, r);
    }
  }
}

void matmul_fast_avx512_blocks(const FastJob& job, int64_t b0, int64_t b1) { affine_blocks(job, b0, b1); }

void matmul_fast_avx512_rows(const FastJob& job, int64_t n0, int64_t n1) { bf16_rows(job, n0, n1); }

}  // namespace specula::detail
