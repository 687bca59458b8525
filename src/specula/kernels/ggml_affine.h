#pragma once
// ggml block formats read as MLX affine quantization (docs/gguf.md §4): for Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q4_K and Q5_K every 32-element run shares one scale and one offset, and for Q6_K
// every 16-element run, so each block is exactly `x = code * scale + bias` with an unsigned code:
//   Q4_0: code = q,       scale = d,        bias = -8 d
//   Q4_1: code = q,       scale = d,        bias = m
//   Q5_0: code = q,       scale = d,        bias = -16 d
//   Q5_1: code = q,       scale = d,        bias = m
//   Q8_0: code = q + 128, scale = d,        bias = -128 d
//   Q4_K / Q5_K, sub-block s: code = q, scale = d * sc[s], bias = -(dmin * mn[s])
//   Q6_K, sub-block s of 16: code = q (6 bits, kept as an 8-bit code), scale = d * sc[s],
//        bias = -32 d sc[s]
// Each product is exact in f32 (an f16 times an integer of at most 8 bits), and so is each
// dequantized value, which therefore equals dequantize_row_ggml's (a zero may come out as +0 where
// ggml's d * (q - 8) with a negative d gives -0). The other types have no such form.
#include <cstdint>

#include "specula/io/gguf.h"

namespace specula {

// The affine code width of a type with an exact affine form, 0 for any other type.
int ggml_affine_bits(GgmlType t);
// The affine group size of such a type: 16 for Q6_K, 32 for the others.
int ggml_affine_group(GgmlType t);

// Whether the affine scales and biases of a Q4_K, Q5_K or Q6_K row (n elements) are, per 256, one
// f32 factor times int8 multipliers (kernels/shared_scales.h): d * sc and -dmin * mn are whenever
// d and dmin are finite, except for a Q6_K block with d = 0 whose sub-block scales have both signs
// (its zeros then have both signs). Reads only the blocks' d, dmin and, where d = 0, sc. False for
// every other type.
bool ggml_scales_share_factors(GgmlType t, const void* src, int64_t n);

// One row of n elements (n a multiple of the type's block size) into codes[n] and
// scales/biases[n / ggml_affine_group(t)]. Throws for a type without an affine form.
void ggml_row_to_affine(GgmlType t, const void* src, int64_t n, uint8_t* codes, float* scales, float* biases);

}  // namespace specula
