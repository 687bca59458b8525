#pragma once
// MLX affine quantization (docs/gemma4.md §4): LSB-first bit stream of `bits`-wide codes per row,
// stored in little-endian uint32 words; one (scale, bias) pair per group of `group_size` elements.
#include <cstdint>
#include <span>

#include "specula/kernels/weight_matrix.h"

namespace specula {

bool is_supported_bits(int bits);      // 2, 3, 4, 5, 6, 8
bool is_supported_group_size(int gs);  // 16 (GGUF Q6_K), 32, 64, 128

// Packs codes (each < 2^bits) of one row into ceil(n*bits/32) words (n*bits must be a multiple of 32).
void pack_codes(std::span<const uint8_t> codes, int bits, std::span<uint32_t> words);
// Reads code j of a packed row.
uint32_t unpack_code(const uint32_t* words, int bits, int64_t j);

// Quantizes one f32 row with MLX's affine rule (its fallback op: true group min/max),
// writing packed words and f32 scale/bias per group. Used by synth and tests.
void quantize_row_affine(std::span<const float> row, int bits, int group_size, std::span<uint32_t> words,
                         std::span<float> scales, std::span<float> biases);

// Dequantizes (or widens) row `row` of W into out[0..cols): the embedding-row gather.
void dequantize_row(const WeightMatrix& w, int64_t row, float* out);

// Gathers rows ids[0..n) of a table into out[n, cols]; throws on an id outside [0, rows).
void gather_rows(const WeightMatrix& table, const int32_t* ids, int64_t n, float* out);

}  // namespace specula
