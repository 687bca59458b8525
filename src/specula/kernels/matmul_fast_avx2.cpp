// Fast-precision matmul kernel for AVX2 CPUs without AVX-512 VNNI (and under SPECULA_ISA=avx2):
// affine 4-bit and 8-bit weights in the packed layout of kernels/packed_affine.h (16 W rows side
// by side), the same FastJob and the same math as the AVX-512 VNNI kernel
// (matmul_fast_avx512.cpp). BF16 weights have no AVX2 fast kernel; they run the exact kernels.
//
// Bitwise equal to the AVX-512 kernel by construction. Every AVX-512 vector of 16 lanes is held
// here as two ymm halves (lanes 0-7, 8-15), each lane updated by the same IEEE operation in the
// same order:
//  * X preparation: per group, the lane-wise running max of |x| over the 16-float steps, then
//    GCC's _mm512_reduce_max_ps tree written out on the two halves (upper op lower, then 128-bit
//    halves, then the {2,3,0,1} and {1,0,1,0} shuffles); the same scalar levels / max, the same
//    round-to-nearest-even conversion (`vcvtps2dq`), the same saturation to int16 (`vpackssdw`,
//    as `vpmovsdw`; int8 levels: then `vpacksswb` or a clamp to [-128, 127], as `vpmovsdb`), and
//    the group's sum of codes in int32 (exact), times the same scale.
//  * Integer products: a 32-byte chunk of codes is widened to 16-bit words half by half and
//    `vpmaddwd` multiplies them with a broadcast pair of activations; `vpaddd` sums them. Integer
//    sums are exact (|sum| < 2^31 for every group size: 128 inputs x 255 x 32768), so a group's
//    int32 total per W row equals the one `vpdpwssd` (int16) or `vpdpbusd` (int8) builds, whatever
//    the order.
//  * Per group and X row: d = scales * s_x; acc = fma(float(total), d, acc);
//    acc = fma(biases, s_x * sum(q), acc) — the AVX-512 kernel's ops, lane by lane. No product here
//    feeds an addition, so FP contraction cannot fuse anything differently in either file.
// Precision::Int8 quantizes X to the int8 levels (127). With 4-bit codes, `vpmaddubsw` multiplies
// 4 codes (unsigned bytes) with 4 int8 activations per lane and W row: each int16 pair sum is at
// most 2 x 15 x 128 = 3840 in magnitude, so it never saturates and 8 of them add up in int16
// (<= 30720) before `vpmaddwd` by ones widens them to int32: exact, so the bytes of the AVX-512
// int8 kernel. 8-bit codes would saturate `vpmaddubsw` (2 x 255 x 128); they keep the int8 codes in
// int16 words and run the int16 kernel (the same bytes, at fast mode's speed).
// tests/threaded/matmul_fast_avx2_test.cpp holds both kernels to a scalar model of these operations.
//
// Batch invariance: templated on the number R of X rows handled together; every row keeps its own
// accumulators, updated by the same ops in the same order for every R, and X is prepared row by
// row. Threads split N only.
//
// No standard-library templates here (see MatmulJob in matmul_kernels.h).
#include <immintrin.h>

#include "specula/kernels/matmul_kernels.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/packed_header_walk.h"
#include "specula/kernels/unroll.h"

namespace specula::detail {

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// As the AVX-512 kernel: the packed W stream is prefetched this far ahead (bytes).
constexpr int64_t kAffinePrefetchBytes = 8192;

// X rows per kernel call: acc and integer sums of 4 rows (2 + 2 ymm each) and the unpacked codes
// fit the 16 ymm registers; rows 5..8 of a decode-sized call reuse the block from L1.
constexpr int kRowBlock = 4;

// ---- X preparation -------------------------------------------------------------------------------

inline __m256 abs_ps(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }

// The sum of the 8 int32 lanes (exact: any order gives the AVX-512 kernel's total).
inline int32_t reduce_add_epi32(__m256i v) {
  const __m128i t4 = _mm_add_epi32(_mm256_extracti128_si256(v, 1), _mm256_castsi256_si128(v));
  const __m128i t2 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_add_epi32(t2, _mm_shuffle_epi32(t2, _MM_SHUFFLE(2, 3, 0, 1))));
}

// _mm512_reduce_max_ps likewise.
inline float reduce_max16(__m256 lo, __m256 hi) {
  const __m256 t3 = _mm256_max_ps(hi, lo);
  const __m128 t6 = _mm_max_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  const __m128 t8 = _mm_max_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m128 t10 = _mm_max_ps(t8, _mm_shuffle_ps(t8, t8, _MM_SHUFFLE(0, 1, 0, 1)));
  return _mm_cvtss_f32(t10);
}

// Quantizes X row `r` into job.xq (int16 words, int8 levels when job.xq_int8_levels) or job.xq8
// (int8), natural order, and job.x_group_scales and job.x_group_sums.
void prepare_affine_row(const FastJob& job, int64_t r) {
  const WeightMatrix& w = *job.w;
  const int gs = w.group_size;
  const float* x = job.x + r * job.ldx;
  const bool bytes = job.xq8 != nullptr;
  const bool int8 = bytes || job.xq_int8_levels;
  const float levels = int8 ? kActivationLevels8 : kActivationLevels;
  int16_t* xq = bytes ? nullptr : job.xq + r * w.cols;
  int8_t* xq8 = bytes ? job.xq8 + r * w.cols : nullptr;
  float* sums = job.x_group_sums + r * job.groups;
  float* group_scale = job.x_group_scales + r * job.groups;
  const __m256i lo8 = _mm256_set1_epi16(-128), hi8 = _mm256_set1_epi16(127);
  for (int64_t g = 0; g < job.groups; ++g) {
    const float* xg = x + g * gs;
    __m256 max_lo = _mm256_setzero_ps(), max_hi = _mm256_setzero_ps();
    for (int j = 0; j < gs; j += 16) {
      max_lo = _mm256_max_ps(max_lo, abs_ps(_mm256_loadu_ps(xg + j)));
      max_hi = _mm256_max_ps(max_hi, abs_ps(_mm256_loadu_ps(xg + j + 8)));
    }
    const float amax = reduce_max16(max_lo, max_hi);
    // amax == 0: every activation of the group is zero and so is its scale.
    const float inv = amax > 0.0f ? levels / amax : 0.0f;
    group_scale[g] = amax / levels;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i qsum = _mm256_setzero_si256();
    for (int j = 0; j < gs; j += 16) {
      // |x| * levels / amax <= levels: the codes never saturate, so qsum sums the stored codes.
      const __m256i q_lo = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j), vinv));
      const __m256i q_hi = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 8), vinv));
      qsum = _mm256_add_epi32(qsum, _mm256_add_epi32(q_lo, q_hi));
      // vpackssdw interleaves the 128-bit lanes; the permute puts the 16 words back in order.
      __m256i q = _mm256_permute4x64_epi64(_mm256_packs_epi32(q_lo, q_hi), _MM_SHUFFLE(3, 1, 2, 0));
      if (bytes) {
        // vpacksswb saturates to int8 as vpmovsdb does; the permute gathers the 16 bytes in order.
        const __m256i b = _mm256_permute4x64_epi64(_mm256_packs_epi16(q, q), _MM_SHUFFLE(3, 1, 2, 0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(xq8 + g * gs + j), _mm256_castsi256_si128(b));
      } else {
        if (int8) q = _mm256_min_epi16(_mm256_max_epi16(q, lo8), hi8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + g * gs + j), q);
      }
    }
    sums[g] = group_scale[g] * static_cast<float>(reduce_add_epi32(qsum));
  }
}

// ---- block kernels -------------------------------------------------------------------------------

// The pair of activations (x[0], x[1]) in every 32-bit lane.
typedef int32_t __attribute__((may_alias)) PairBits;
inline __m256i pair(const int16_t* x) { return _mm256_set1_epi32(*reinterpret_cast<const PairBits*>(x)); }

// 8 scales or biases of a packed group widened to f32.
inline __m256 load_params8(const uint8_t* p, DType t) {
  if (t == DType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return t == DType::BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

// 8 int8 multipliers widened to f32.
inline __m256 int8_lanes(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// W rows 8h..8h+7's scales and biases of the group whose parameters start at `params` (`bytes`
// each). Shared factors give factor * multiplier, the stored value bit for bit.
template <bool SHARED>
inline void group_params(const uint8_t* params, DType dtype, int64_t bytes, const HeaderWalk& walk, int h,
                         __m256& scales, __m256& biases) {
  const int64_t half = bytes / 2;
  if constexpr (SHARED) {
    const auto* factors = reinterpret_cast<const float*>(walk.header);
    scales = _mm256_mul_ps(_mm256_loadu_ps(factors + 8 * h), int8_lanes(params + h * half));
    biases = _mm256_mul_ps(_mm256_loadu_ps(factors + kPackedRows + 8 * h), int8_lanes(params + bytes + h * half));
  } else {
    scales = load_params8(params + h * half, dtype);
    biases = load_params8(params + bytes + h * half, dtype);
  }
}

// The codes of W rows 8h..8h+7 of a 32-byte chunk as 16-bit words (row j: words 2j, 2j + 1).
inline __m256i chunk_half(const uint8_t* chunk, int h) {
  return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk + 16 * h)));
}

// Rows' accumulators (lanes 0-7, 8-15) to y[r * ldy + j] for j < valid.
template <int R>
inline void store_rows(const __m256 (&acc)[R][2], float* y, int64_t ldy, int64_t valid) {
  if (valid >= 16) {
    SPECULA_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(y + r * ldy, acc[r][0]);
      _mm256_storeu_ps(y + r * ldy + 8, acc[r][1]);
    }
  } else {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid) - 8), lane);
    SPECULA_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      _mm256_maskstore_ps(y + r * ldy, m0, acc[r][0]);
      _mm256_maskstore_ps(y + r * ldy + 8, m1, acc[r][1]);
    }
  }
}

// One packed block (16 W rows) against R X rows: y[r * ldy + j] for the lanes j < valid.
// SHARED: the block's parameters are shared factors (GGUF K-quants; a variant of its own so that
// the per-group layout's kernels stay as they are).
// Per group, the block's two halves (W rows 0-7, 8-15) are taken one after the other (the second
// reads the group's codes from L1), so that the integer sums of R rows and the unpacked codes of
// one half fit the 16 ymm registers. Per row, group and half, the integer sum is built in one
// chain of `vpaddd` and
//   acc = fma(float(isum), scale * s_x, acc);  acc = fma(bias, sum(x), acc)
// applies in group order: the same operations for every R.
template <int BITS, int GS, int R, bool SHARED>
void affine_block(const uint8_t* p, int64_t groups, PackedParams pp, const int16_t* xq, int64_t ldq,
                  const float* xscale, const float* xsum, int64_t ldg, float* y, int64_t ldy, int64_t valid) {
  constexpr int kChunks = BITS == 4 ? GS / 4 : GS / 2;  // 32-byte chunks per group
  const int64_t pbytes = param_bytes<SHARED>(pp);
  HeaderWalk walk;
  const __m256i low_nibbles = _mm256_set1_epi16(0x000f);
  __m256 acc[R][2];
  SPECULA_UNROLL(8)
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    if constexpr (SHARED) p = enter_group(p, pp, walk);
    const uint8_t* params = p + kChunks * 32;
    SPECULA_UNROLL(2)
    for (int h = 0; h < 2; ++h) {
      // One pointer per X row, hidden from the optimizer per half: otherwise GCC keeps the
      // broadcast pairs of the first half for the second, spilled to the stack.
      const int16_t* xr[R];
      SPECULA_UNROLL(8)
      for (int r = 0; r < R; ++r) {
        xr[r] = xq + r * ldq + g * GS;
        asm("" : "+r"(xr[r]));
      }
      __m256i isum[R];
      SPECULA_UNROLL(8)
      for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
      SPECULA_UNROLL(32)
      for (int c = 0; c < kChunks; ++c) {
        const uint8_t* chunk = p + c * 32;
        if (h == 0 && c % 2 == 0) {  // once per 64-byte line
          _mm_prefetch(reinterpret_cast<const char*>(chunk + kAffinePrefetchBytes), _MM_HINT_T0);
        }
        const __m256i raw = chunk_half(chunk, h);
        if constexpr (BITS == 4) {
          const __m256i lo = _mm256_and_si256(raw, low_nibbles);  // inputs k, k+1
          const __m256i hi = _mm256_srli_epi16(raw, 4);           // inputs k+2, k+3
          SPECULA_UNROLL(8)
          for (int r = 0; r < R; ++r) {
            const __m256i prod = _mm256_add_epi32(_mm256_madd_epi16(lo, pair(xr[r] + 4 * c)),
                                                  _mm256_madd_epi16(hi, pair(xr[r] + 4 * c + 2)));
            isum[r] = _mm256_add_epi32(isum[r], prod);
            asm("" : "+x"(isum[r]));  // one chain as written: GCC's reassociation kept every product live
          }
        } else {
          SPECULA_UNROLL(8)
          for (int r = 0; r < R; ++r) {
            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(raw, pair(xr[r] + 2 * c)));
            asm("" : "+x"(isum[r]));
          }
        }
      }
      __m256 scales, biases;
      group_params<SHARED>(params, pp.dtype, pbytes, walk, h, scales, biases);
      SPECULA_UNROLL(8)
      for (int r = 0; r < R; ++r) {
        const __m256 d = _mm256_mul_ps(scales, _mm256_set1_ps(xscale[r * ldg + g]));
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), d, acc[r][h]);
        acc[r][h] = _mm256_fmadd_ps(biases, _mm256_set1_ps(xsum[r * ldg + g]), acc[r][h]);
      }
    }
    p = params + 2 * pbytes;
  }
  store_rows<R>(acc, y, ldy, valid);
}

using AffineBlockFn = void (*)(const uint8_t*, int64_t, PackedParams, const int16_t*, int64_t, const float*,
                               const float*, int64_t, float*, int64_t, int64_t);

template <int BITS, int GS, bool SHARED = false>
struct AffineKernels {
  static constexpr AffineBlockFn by_rows[kRowBlock] = {
      affine_block<BITS, GS, 1, SHARED>, affine_block<BITS, GS, 2, SHARED>, affine_block<BITS, GS, 3, SHARED>,
      affine_block<BITS, GS, 4, SHARED>};
};

template <int BITS>
const AffineBlockFn* affine_kernels(int gs, bool shared) {
  // The shared-factor formats here: Q4_K (4-bit groups of 32), Q5_K (8-bit codes in groups of 32)
  // and Q6_K (8-bit groups of 16).
  if constexpr (BITS == 4) {
    if (shared) return AffineKernels<4, 32, true>::by_rows;
  } else {
    if (shared) return gs == 16 ? AffineKernels<8, 16, true>::by_rows : AffineKernels<8, 32, true>::by_rows;
    if (gs == 16) return AffineKernels<8, 16>::by_rows;
  }
  return gs == 32   ? AffineKernels<BITS, 32>::by_rows
         : gs == 64 ? AffineKernels<BITS, 64>::by_rows
                    : AffineKernels<BITS, 128>::by_rows;
}

// ---- 4-bit codes, int8 activations (Precision::Int8) ----------------------------------------------

// The quad of activations x[0..3] in every 32-bit lane.
inline __m256i quad(const int8_t* x) { return _mm256_set1_epi32(*reinterpret_cast<const PairBits*>(x)); }

// The codes of W rows 8h..8h+7 for 4 consecutive inputs of a 32-byte chunk, one row per 32-bit
// lane, bytes in input order (as the AVX-512 int8 kernel builds them): row j's word holds
// lo(2j), lo(2j + 1) in its low nibbles and hi(2j), hi(2j + 1) in its high ones.
inline __m256i quad_codes_half(const uint8_t* chunk, int h) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk + 16 * h)));
  return _mm256_and_si256(_mm256_or_si256(v, _mm256_slli_epi32(v, 12)), _mm256_set1_epi32(0x0f0f0f0f));
}

// As affine_block, for 4-bit codes and int8 activations: per quad `vpmaddubsw` (two int16 pair
// sums per lane), up to 8 quads summed in int16, then `vpmaddwd` by ones into the int32 chain.
template <int GS, int R, bool SHARED>
void affine_block_i8(const uint8_t* p, int64_t groups, PackedParams pp, const int8_t* xq, int64_t ldq,
                     const float* xscale, const float* xsum, int64_t ldg, float* y, int64_t ldy, int64_t valid) {
  constexpr int kQuads = GS / 4;  // one 32-byte chunk each
  constexpr int kRun = 8;         // quads summed in int16: 8 x 3840 < 32768
  const int64_t pbytes = param_bytes<SHARED>(pp);
  HeaderWalk walk;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][2];
  SPECULA_UNROLL(8)
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    if constexpr (SHARED) p = enter_group(p, pp, walk);
    const uint8_t* params = p + kQuads * 32;
    SPECULA_UNROLL(2)
    for (int h = 0; h < 2; ++h) {
      const int8_t* xr[R];
      SPECULA_UNROLL(8)
      for (int r = 0; r < R; ++r) {
        xr[r] = xq + r * ldq + g * GS;
        asm("" : "+r"(xr[r]));
      }
      __m256i isum[R];
      SPECULA_UNROLL(8)
      for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
      SPECULA_UNROLL(4)
      for (int q0 = 0; q0 < kQuads; q0 += kRun) {
        __m256i sum16[R];
        SPECULA_UNROLL(8)
        for (int r = 0; r < R; ++r) sum16[r] = _mm256_setzero_si256();
        SPECULA_UNROLL(8)
        for (int q = q0; q < q0 + kRun; ++q) {
          const uint8_t* chunk = p + q * 32;
          if (h == 0 && q % 2 == 0) {  // once per 64-byte line
            _mm_prefetch(reinterpret_cast<const char*>(chunk + kAffinePrefetchBytes), _MM_HINT_T0);
          }
          const __m256i codes = quad_codes_half(chunk, h);
          SPECULA_UNROLL(8)
          for (int r = 0; r < R; ++r) {
            sum16[r] = _mm256_add_epi16(sum16[r], _mm256_maddubs_epi16(codes, quad(xr[r] + 4 * q)));
            asm("" : "+x"(sum16[r]));
          }
        }
        SPECULA_UNROLL(8)
        for (int r = 0; r < R; ++r) isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(sum16[r], ones));
      }
      __m256 scales, biases;
      group_params<SHARED>(params, pp.dtype, pbytes, walk, h, scales, biases);
      SPECULA_UNROLL(8)
      for (int r = 0; r < R; ++r) {
        const __m256 d = _mm256_mul_ps(scales, _mm256_set1_ps(xscale[r * ldg + g]));
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), d, acc[r][h]);
        acc[r][h] = _mm256_fmadd_ps(biases, _mm256_set1_ps(xsum[r * ldg + g]), acc[r][h]);
      }
    }
    p = params + 2 * pbytes;
  }
  store_rows<R>(acc, y, ldy, valid);
}

using AffineBlockI8Fn = void (*)(const uint8_t*, int64_t, PackedParams, const int8_t*, int64_t, const float*,
                                 const float*, int64_t, float*, int64_t, int64_t);

template <int GS, bool SHARED = false>
struct AffineKernelsI8 {
  static constexpr AffineBlockI8Fn by_rows[kRowBlock] = {affine_block_i8<GS, 1, SHARED>, affine_block_i8<GS, 2, SHARED>,
                                                         affine_block_i8<GS, 3, SHARED>,
                                                         affine_block_i8<GS, 4, SHARED>};
};

const AffineBlockI8Fn* affine_kernels_i8(int gs, bool shared) {
  if (shared) return AffineKernelsI8<32, true>::by_rows;  // Q4_K
  return gs == 32   ? AffineKernelsI8<32>::by_rows
         : gs == 64 ? AffineKernelsI8<64>::by_rows
                    : AffineKernelsI8<128>::by_rows;
}

}  // namespace

void matmul_fast_avx2_prepare(const FastJob& job, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) prepare_affine_row(job, r);
}

// Packed blocks [b0, b1): decode (M <= 8) streams each block once for all X rows (in row blocks
// of 4, the second from L1); prefill takes the X rows in L2-sized passes and runs each block, from
// L1, over the pass.
void matmul_fast_avx2_blocks(const FastJob& job, int64_t b0, int64_t b1) {
  const WeightMatrix& w = *job.w;
  const int64_t m = job.m, k = w.cols;
  const bool shared = job.params.superblock_groups > 0;
  const AffineBlockFn* kernels =
      packed_code_bits(w) == 4 ? affine_kernels<4>(w.group_size, shared) : affine_kernels<8>(w.group_size, shared);
  const AffineBlockI8Fn* kernels_i8 = affine_kernels_i8(w.group_size, shared);  // 4-bit codes, int8 X (job.xq8)
  const int64_t block_bytes = job.block_bytes;
  int64_t pass = kFastPrefillBytes / ((job.xq8 != nullptr ? 1 : 2) * k) / kMatmulRowBlock * kMatmulRowBlock;
  if (pass < kMatmulRowBlock) pass = kMatmulRowBlock;
  for (int64_t m0 = 0; m0 < m; m0 += pass) {
    const int64_t m1 = min64(m, m0 + pass);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * 16;
      const uint8_t* block = job.packed + b * block_bytes;
      for (int64_t r0 = m0; r0 < m1; r0 += kRowBlock) {
        const int64_t rows = min64(kRowBlock, m1 - r0);
        const float* xscale = job.x_group_scales + r0 * job.groups;
        const float* xsum = job.x_group_sums + r0 * job.groups;
        float* y = job.y + r0 * job.ldy + n0;
        if (job.xq8 != nullptr) {
          kernels_i8[rows - 1](block, job.groups, job.params, job.xq8 + r0 * k, k, xscale, xsum, job.groups, y, job.ldy,
                               w.rows - n0);
        } else {
          kernels[rows - 1](block, job.groups, job.params, job.xq + r0 * k, k, xscale, xsum, job.groups, y, job.ldy,
                            w.rows - n0);
        }
      }
    }
  }
}

}  // namespace specula::detail
