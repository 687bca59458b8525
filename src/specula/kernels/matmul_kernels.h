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
  int64_t groups = 0;          // groups per W row
  int64_t groups_padded = 0;   // rounded up to 16, zero padded
  float* x_perm = nullptr;     // [m, cols]: X reordered to the order codes come out of packed words
  float* x_group_sums = nullptr;  // [m, groups_padded]: sum of X over each quantization group
  float* worker_rows = nullptr;   // [pool.size(), 2 * groups_padded]: one W row's scales, biases
  const float* xk = nullptr;   // X as the kernels read it (x or x_perm)
  int64_t ldxk = 0;
};

// groups_per_row rounded up to a multiple of 16 (the widest vector of floats).
inline int64_t padded_groups(const WeightMatrix& w) { return (w.groups_per_row() + 15) / 16 * 16; }

void matmul_scalar(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y,
                   int64_t ldy, ThreadPool& pool);
#if defined(SPECULA_X86)
// prepare(): per-call work on X (group sums, permutation); rows(): W rows [n0, n1) for all X rows.
void matmul_avx2_prepare(MatmulJob& job);
void matmul_avx2_rows(const MatmulJob& job, int worker, int64_t n0, int64_t n1);
void matmul_avx512_prepare(MatmulJob& job);
void matmul_avx512_rows(const MatmulJob& job, int worker, int64_t n0, int64_t n1);
#endif

}  // namespace specula::detail
