#pragma once
// Y[M, N] = X[M, K] · W[N, K]ᵀ with X, Y float32 row-major and W in any WeightFormat.
//
// Contracts (docs/architecture.md §3, tested bitwise):
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
// (int16 activations x quantized weights with AVX-512 VNNI, or with AVX2 `vpmaddwd` to the same
// bytes; bf16 hi+lo activations x bf16 weights with AVX512-BF16); norms, softmax, RoPE, residuals
// and the KV cache stay f32. All three modes are batch invariant and deterministic. Quantized
// matrices are read in the packed layout of kernels/packed_affine.h (WeightMatrix::packed, set
// once by the models at load; packed per call otherwise, with the same result).
// Int8: as Fast, with the affine matrices' activations quantized to int8 per group
// (`vpdpbusd`: twice the multiply-adds per instruction of the int16 path, so verifies of several
// rows cost less; on AVX2 the same bytes, faster than Fast for 4-bit weights only),
// at the price of 140-1100x the int16 path's logit error on the golden models
// (0.13-0.75 relative, against the 3e-2 bar Fast holds; docs/performance.md). BF16 matrices run as
// in Fast.
enum class Precision { Exact, Fast, Int8 };
// "exact", "fast" or "int8"; throws specula::Error naming the value.
Precision parse_precision(const std::string& text);
const char* precision_name(Precision p);
// Fast or Int8: the modes that use the low-precision kernels and their packed weights.
inline bool is_low_precision(Precision p) { return p != Precision::Exact; }

// ldx / ldy: row strides in elements (>= K / >= N). `precision` = Fast or Int8 uses the fast
// kernels where fast_matmul_supported(w), and the exact ones otherwise.
void matmul(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy, ThreadPool& pool,
            Precision precision = Precision::Exact);

inline void matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, ThreadPool& pool,
                   Precision precision = Precision::Exact) {
  matmul(x, m, w.cols, w, y, w.rows, pool, precision);
}

// Whether Precision::Fast has a low-precision kernel for w with the active kernel set on this CPU:
//  * affine 4-bit and 8-bit weights: int16 activations per quantization group, `vpdpwssd`
//    (AVX-512 VNNI; Int8: int8 activations, `vpdpbusd`), or under the AVX2 kernel set (and on
//    AVX-512 CPUs without VNNI) `vpmaddwd` with the same integer sums and float ops, so the same
//    bytes (Int8 there, the same bytes as `vpdpbusd`: 4-bit codes with `vpmaddubsw`, which cannot
//    saturate on them; 8-bit codes through the int16 kernel); other widths (2, 3, 5, 6 bits) run
//    the exact kernel;
//  * BF16 weights: activations as two bf16 terms (hi + lo), `vdpbf16ps` (AVX-512 BF16); without
//    it they run the exact kernel;
//  * F32 and F16 weights always run the exact kernel (no cheaper inner product keeps their
//    accuracy, and the checkpoints that matter store matrices quantized or in bf16).
// With the scalar kernel set, fast and int8 modes are the exact mode.
bool fast_matmul_supported(const WeightMatrix& w);

// The fast kernel matmul(.., precision) runs w with: "avx512 vnni", "avx512 vnni int8",
// "avx2 int16", "avx2 int8" (4-bit) or "avx2 int16 (int8 levels)" (8-bit), "avx512 bf16"; nullptr for
// the exact kernels.
const char* fast_kernel_name(const WeightMatrix& w, Precision precision);
// For logs and `specula bench`: the fast kernels of affine and bf16 matrices under `precision` on
// this CPU, e.g. "fast: avx2 int16 for 2-8-bit, fast→exact fallback for bf16"; empty for exact.
std::string fast_kernels_summary(Precision precision);

namespace reference {
// Plain scalar reference: dequantize each weight to f32 and accumulate in f32, k ascending.
void matmul(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy);

// Scalar reference of the fast math, whatever the CPU (float64 sums of the exactly computed
// products; the kernels are held to it with a tolerance):
//  * affine (any width): per row r and group g, s = max|x| / L,
//    xq = round-half-even(x * L / max|x|) with L = 32767 (int16; Int8: L = 127),
//    y = sum_g scale_g * s * (sum_j q_j xq_j) + sum_g bias_g * (sum_j x_j);
//  * BF16: hi = bf16(x), lo = bf16(x - hi) (nearest even), y = sum_j w_j * (hi_j + lo_j);
//  * other formats: the exact reference above.
void matmul_fast(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy,
                 Precision precision = Precision::Fast);
}  // namespace reference

}  // namespace specula
