#pragma once
// Y[M, N] = X[M, K] · W[N, K]ᵀ with X, Y float32 row-major and W in any WeightFormat.
//
// Contracts (DESIGN.md §3, tested bitwise):
//  * Batch invariance: row r of Y is the same bytes for every M, every position of r in the
//    batch and every thread count (a fixed per-element reduction order; threads split N only).
//  * For M <= 8 each weight byte is read from memory once per call for all rows.
#include <cstdint>
#include <string>

#include "specula/kernels/weight_matrix.h"
#include "specula/util/thread_pool.h"

namespace specula {

// Exact: f32 activations and f32 accumulation (held to 1e-4 against the float64 goldens).
// Fast: the inner products run on integer or bf16 activations where the CPU has the instructions
// (int16 activations x quantized weights with AVX-512 VNNI, bf16 hi+lo activations x bf16 weights
// with AVX512-BF16); norms, softmax, RoPE, residuals and the KV cache stay f32. Both modes are
// batch invariant and deterministic. Quantized matrices are read in the packed layout of
// kernels/packed_affine.h (WeightMatrix::packed, set once by the models at load; packed per call
// otherwise, with the same result).
enum class Precision { Exact, Fast };
// "exact" or "fast"; throws specula::Error naming the value.
Precision parse_precision(const std::string& text);
const char* precision_name(Precision p);

// ldx / ldy: row strides in elements (>= K / >= N). `precision` = Fast uses the fast kernels where
// fast_matmul_supported(w), and the exact ones otherwise.
void matmul(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy,
            ThreadPool& pool, Precision precision = Precision::Exact);

inline void matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool& pool,
                   Precision precision = Precision::Exact) {
  matmul(x, m, w.cols, w, y, w.rows, pool, precision);
}

// Whether Precision::Fast has a low-precision kernel for w with the active kernel set on this CPU:
//  * affine 4-bit and 8-bit weights: int16 activations per quantization group, `vpdpwssd`
//    (AVX-512 VNNI); other widths (2, 3, 5, 6 bits) run the exact kernel;
//  * BF16 weights: activations as two bf16 terms (hi + lo), `vdpbf16ps` (AVX-512 BF16);
//  * F32 and F16 weights always run the exact kernel (no cheaper inner product keeps their
//    accuracy, and the checkpoints that matter store matrices quantized or in bf16).
// Without the AVX-512 kernel set (or the instruction), fast mode is the exact mode.
bool fast_matmul_supported(const WeightMatrix& w);

namespace reference {
// Plain scalar reference: dequantize each weight to f32 and accumulate in f32, k ascending.
void matmul(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy);

// Scalar reference of the fast math, whatever the CPU (float64 sums of the exactly computed
// products; the kernels are held to it with a tolerance):
//  * affine 4/8-bit: per row r and group g, s = max|x| / 32767,
//    xq = round-half-even(x * 32767 / max|x|) (int16),
//    y = sum_g scale_g * s * (sum_j q_j xq_j) + sum_g bias_g * (sum_j x_j);
//  * BF16: hi = bf16(x), lo = bf16(x - hi) (nearest even), y = sum_j w_j * (hi_j + lo_j);
//  * other formats: the exact reference above.
void matmul_fast(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy);
}  // namespace reference

}  // namespace specula
