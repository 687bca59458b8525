#pragma once
// Internal: the per-ISA matmul entry points behind specula::matmul (kernels/matmul.cpp dispatches
// on active_isa()). Arguments are validated by the dispatcher; m, rows and cols are > 0.
#include <cstdint>

#include "specula/kernels/weight_matrix.h"
#include "specula/util/thread_pool.h"

namespace specula::detail {

// Rows of W handed to one pool task; also the tile of W rows kept hot while X row blocks stream.
inline constexpr int64_t kMatmulGrain = 16;
// X rows processed together against one pass over a W row (each weight byte read once for them).
inline constexpr int kMatmulRowBlock = 8;

// One matmul call as the per-ISA kernels see it. The dispatcher (baseline code) validates the
// arguments, allocates the scratch and runs the thread pool, so the ISA translation units use no
// standard-library templates: an inline function compiled there with -mavx512f could otherwise be
// the copy the linker keeps for baseline callers.
struct MatmulJob {
  const float* x = nullptr;
  int64_t m = 0, ldx = 0;
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  // Affine only: scratch filled by prepare().
  int64_t groups = 0;             // groups per W row
  int64_t groups_padded = 0;      // rounded up to 16, zero padded
  float* x_perm = nullptr;        // [m, cols]: X reordered to the order codes come out of packed words
  float* x_group_sums = nullptr;  // [m, groups_padded]: sum of X over each quantization group
  float* worker_rows = nullptr;   // [pool.size(), 2 * groups_padded]: one W row's scales, biases
  const float* xk = nullptr;      // X as the kernels read it (x or x_perm)
  int64_t ldxk = 0;
};

// How a packed block stores its groups' scales and biases (kernels/packed_affine.h).
struct PackedParams {
  DType dtype = DType::BF16;      // per-group values (superblock_groups == 0)
  int64_t superblock_groups = 0;  // > 0: f32 factors per this many groups, int8 multipliers per group
};

// Fast precision (matmul_fast_avx512.cpp, matmul_fast_avx2.cpp): one call as its kernels see it. Scratch is allocated
// by the dispatcher; prepare(job, r0, r1) fills it for X rows [r0, r1) (each row on its own, so any split of the rows
// gives the same bytes); blocks()/rows() compute the outputs.
struct FastJob {
  const float* x = nullptr;
  int64_t m = 0, ldx = 0;
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  // Affine: W in the packed layout (kernels/packed_affine.h), X as int16 per group.
  const uint8_t* packed = nullptr;
  int64_t block_bytes = 0;          // packed bytes of one block of 16 W rows
  PackedParams params;              // how its groups' scales and biases are stored
  int64_t groups = 0;               // quantization groups per W row
  int16_t* xq = nullptr;            // [m, cols]: activations, natural order
  int8_t* xq8 = nullptr;            // [m, cols]: int8 activations instead (Precision::Int8)
  bool xq_int8_levels = false;      // AVX2, Int8, 8-bit W: xq holds the int8 codes as int16
  float* x_group_scales = nullptr;  // [m, groups]: x ~ scale * xq per group
  float* x_group_sums = nullptr;    // [m, groups]: scale times the sum of the group's codes
  // BF16: X split into two bf16 terms, x ~ hi + lo (hi = bf16(x), lo = bf16(x - hi)).
  uint16_t* xb = nullptr;  // [m, 2 * ldb]: per row ldb hi values, then ldb lo values
  int64_t ldb = 0;         // K rounded up to 32 (zero padded)
};

// Activation quantization of the affine fast path: per row and quantization group,
// s = max|x| / kActivationLevels and q = round-half-even(x * kActivationLevels / max|x|) as int16;
// the group's bias multiplies s * sum(q), so a row's result is the dequantized weights times the
// quantized activations. (int8 activations, amplified through the layers, move the golden
// models' logits by 0.1-0.75 relative; int16 keeps fast mode within 3e-2.)
inline constexpr float kActivationLevels = 32767.0f;
// Precision::Int8: the same per-group quantization to int8 (twice the multiply-adds per
// instruction; outside the golden accuracy bar, so opt-in).
inline constexpr float kActivationLevels8 = 127.0f;

// Prefill: X rows handled per pass over the W blocks of a thread, so that the int16 rows stay in
// L2 (~512 KiB of them) while each 16-row W block is reused from L1 by all of them.
inline constexpr int64_t kFastPrefillBytes = int64_t{512} << 10;

// groups_per_row rounded up to a multiple of 16 (the widest vector of floats).
inline int64_t padded_groups(const WeightMatrix& w) { return (w.groups_per_row() + 15) / 16 * 16; }

void matmul_scalar(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy,
                   ThreadPool& pool);
#if defined(SPECULA_X86)
// prepare(): per-call work on X (group sums, permutation); rows(): W rows [n0, n1) for all X rows.
void matmul_avx2_prepare(MatmulJob& job);
void matmul_avx2_rows(const MatmulJob& job, int worker, int64_t n0, int64_t n1);
void matmul_avx512_prepare(MatmulJob& job);
void matmul_avx512_rows(const MatmulJob& job, int worker, int64_t n0, int64_t n1);
// Needs AVX-512 VNNI (affine) or AVX-512 BF16 (bf16 weights); see matmul.cpp.
void matmul_fast_avx512_prepare(const FastJob& job, int64_t r0, int64_t r1);
// Affine: packed blocks [b0, b1) (16 W rows each) for all X rows.
void matmul_fast_avx512_blocks(const FastJob& job, int64_t b0, int64_t b1);
// BF16: W rows [n0, n1) for all X rows.
void matmul_fast_avx512_rows(const FastJob& job, int64_t n0, int64_t n1);
// AVX2 (matmul_fast_avx2.cpp): affine only; the AVX-512 VNNI kernel's bytes.
void matmul_fast_avx2_prepare(const FastJob& job, int64_t r0, int64_t r1);
void matmul_fast_avx2_blocks(const FastJob& job, int64_t b0, int64_t b1);
#endif

}  // namespace specula::detail
