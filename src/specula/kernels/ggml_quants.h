#pragma once
// ggml's block formats (scalar reference code): dequantizing rows of the types GGUF checkpoints
// use to f32, and simple round-to-nearest quantizers that produce valid blocks of each (for tests
// and synthetic files; for the K-quants they do not search scales the way ggml's quantizers do,
// so their bytes differ from llama.cpp's for the same input).
//
// Block layouts, as ggml-common.h defines them (d, m, dmin: IEEE half; little-endian):
//   Q4_0 (32 elements, 18 bytes): d, qs[16]; x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8)
//   Q4_1 (32, 20): d, m, qs[16]; x = d * q + m with q as in Q4_0 (no offset)
//   Q5_0 (32, 22): d, qh (u32), qs[16]; bit j of qh is bit 4 of q[j] (j < 32); x = d * (q - 16)
//   Q5_1 (32, 24): d, m, qh, qs[16]; x = d * q + m
//   Q8_0 (32, 34): d, int8 qs[32]; x = d * q
//   Q4_K (256, 144): d, dmin, scales[12] (eight 6-bit scale/min pairs), qs[128]; sub-block s of 32
//     elements: x = d * sc[s] * q - dmin * mn[s]; elements 64c..64c+31 in the low nibbles of
//     qs[32c..32c+31], 64c+32..64c+63 in their high nibbles
//   Q5_K (256, 176): as Q4_K plus qh[32]: bit 2c of qh[l] is bit 4 of element 64c+l, bit 2c+1 of 64c+32+l
//   Q6_K (256, 210): ql[128], qh[64], int8 scales[16], d; x = d * scales[s] * (q - 32), s = element / 16
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "specula/io/gguf.h"

namespace specula {

// The block structs (2-byte aligned, no padding: sizeof equals ggml's type size).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

// Block `i` of a row of blocks, copied out (rows need not be aligned for the struct).
template <typename Block>
Block load_ggml_block(const std::byte* p, int64_t i) {
  Block b;
  std::memcpy(&b, p + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}

// A Q5_0 / Q5_1 block's `qh` as one word: bit j is bit 4 of element j.
inline uint32_t q5_high_bits(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// Q4_K / Q5_K: scale and min of sub-block j (0..7), 6 bits each, from the 12 packed bytes.
void get_scale_min_k4(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min);
// The inverse: stores scale and min (each < 64) of sub-block j.
void set_scale_min_k4(int j, uint8_t scale, uint8_t min, uint8_t* scales);

// Whether dequantize_row_ggml / quantize_row_ggml handle the type: F32, F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
bool ggml_dequant_supported(GgmlType t);

// Dequantizes n elements (n a multiple of the block size) from `src` (ggml_row_bytes(t, n) bytes,
// any alignment) into out[0..n). Throws specula::Error for an unsupported type or a bad n.
void dequantize_row_ggml(GgmlType t, const void* src, float* out, int64_t n);
// Quantizes n f32 values into `dst` (ggml_row_bytes(t, n) bytes). Same types and errors.
void quantize_row_ggml(GgmlType t, const float* src, void* dst, int64_t n);

// Row `row` (of t.rows(), each t.ne0() elements) of a GGUF tensor into out[0..ne0); errors name
// the tensor.
void dequantize_gguf_row(const GgufTensor& t, int64_t row, float* out);

}  // namespace specula
