#pragma once
// The pieces of a Gemma 4 decoder layer that the target's blocks (model/target_blocks.cpp) and the
// drafter's layers (model/drafter.cpp) share: row-wise norms and residual adds, query/key
// normalization with RoPE, and the GeGLU MLP. Each works on contiguous rows whatever sequences
// they belong to; every row's bytes depend on that row alone (docs/architecture.md §3).
#include <cstdint>
#include <optional>
#include <vector>

#include "specula/kernels/matmul.h"
#include "specula/kernels/rope.h"
#include "specula/kernels/weight_matrix.h"
#include "specula/util/thread_pool.h"

namespace specula {

// Grows an activation buffer to n floats (never shrinks: buffers are reused step after step).
inline void ensure(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// Row-wise work (norms, GeGLU) on every thread of the pool when there is enough of it (a prefill
// chunk); less (a decode step's norms) runs on the calling thread, where a hand-off would cost more
// than the work. Rows are independent, so the bytes do not depend on the split.
inline constexpr int64_t kParallelElements = 65536;

// (A template, so the decode path's calls run fn directly, with no std::function to build.)
template <typename Fn>
void for_rows(ThreadPool& pool, int64_t rows, int64_t row_elements, Fn&& fn) {
  if (rows < 2 || rows * row_elements < kParallelElements || pool.size() == 1) return fn(0, rows);
  pool.parallel_for(rows, 1, [&](int, int64_t begin, int64_t end) { fn(begin, end); });
}

// How a layer multiplies by its matrices: the model's precision, and for the drafter (whose steps
// are a few rows) bf16 matrices through the exact kernel, faster there than the fast bf16 one
// (two bf16 terms per activation). The choice depends on the matrix alone, never on the row count.
struct Linear {
  ThreadPool& pool;
  Precision precision = Precision::Exact;
  bool bf16_exact = false;

  Precision precision_for(const WeightMatrix& w) const {
    return bf16_exact && w.format == WeightFormat::BF16 ? Precision::Exact : precision;
  }
  // y[n][w.rows] = x[n][w.cols] · wᵀ
  void operator()(const float* x, int64_t n, const WeightMatrix& w, float* y) const {
    matmul(x, n, w, y, pool, precision_for(w));
  }
  // The attention's q, k and v projections: under int8 they keep fast's int16 activations. Their
  // rounding errors reach the attention scores, which the softmax exponentiates: there int8 cost
  // about half of its logits' error for a small share of its speed (docs/performance.md).
  Linear attention_inputs() const {
    Linear l = *this;
    if (l.precision == Precision::Int8) l.precision = Precision::Fast;
    return l;
  }
};

void add_rows(float* x, const float* y, int64_t n);  // x += y, n floats

// rms_norm over contiguous rows of `dim` (in place when y == x), split by rows as above.
void rms_norm_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
                   float* y);

// x += rms_norm(branch) (branch is normalized in place): how every block joins the residual stream.
void add_normed_branch(ThreadPool& pool, float* x, float* branch, int64_t rows, int64_t dim, const float* norm,
                       float eps);

// Per-head RMSNorm then RoPE of n rows of `heads` heads of `head_dim` (queries or keys), in place;
// row r is rotated by cos/sin + r * freqs.rotated_pairs().
void norm_and_rotate_heads(ThreadPool& pool, float* x, int64_t n, int64_t heads, int64_t head_dim, const float* norm,
                           float eps, const RopeFrequencies& freqs, const float* cos, const float* sin);

// down(gelu(gate(in)) * up(in)) for n rows -> out [n][down.rows]. `gate_up`: gate and up as one
// packed matrix (model/fused_matrices.h), used when the fast kernels run it.
void geglu_mlp(const float* in, int64_t n, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
               const std::optional<WeightMatrix>& gate_up, std::vector<float>& g, std::vector<float>& u, float* out,
               const Linear& linear);

}  // namespace specula
