#pragma once
// Y[M, N] = X[M, K] · W[N, K]ᵀ with X, Y float32 row-major and W in any WeightFormat.
//
// Contracts (DESIGN.md §3, tested bitwise):
//  * Batch invariance: row r of Y is the same bytes for every M, every position of r in the
//    batch and every thread count (a fixed per-element reduction order; threads split N only).
//  * For M <= 8 each weight byte is read from memory once per call for all rows.
#include <cstdint>

#include "specula/kernels/weight_matrix.h"
#include "specula/util/thread_pool.h"

namespace specula {

// ldx / ldy: row strides in elements (>= K / >= N).
void matmul(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy,
            ThreadPool& pool);

inline void matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool& pool) {
  matmul(x, m, w.cols, w, y, w.rows, pool);
}

namespace reference {
// Plain scalar reference: dequantize each weight to f32 and accumulate in f32, k ascending.
void matmul(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy);
}  // namespace reference

}  // namespace specula
