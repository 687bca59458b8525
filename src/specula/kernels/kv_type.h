#pragma once
// The element type of the KV cache rows. Every type keeps attention batch invariant: readers turn
// a stored row into f32 exactly, so attention over a store of any type gives the bytes of attention
// over an f32 store holding those values.
//  * F32 keeps the rows as the attention block computed them.
//  * Bf16 rounds each element once when the row is written (round to nearest even): half the
//    memory and the bytes attention reads per key. Readers widen it exactly (a 16-bit shift).
//  * Q8 stores each KV head's row of head_dim elements as head_dim int8 codes followed by one bf16
//    scale per 32 elements (head_dim must be a multiple of 32): scale = the block's largest
//    magnitude / 127 rounded to bf16, code = the nearest integer to x / scale within ±127. About a
//    quarter of the f32 bytes. A code times its scale has at most 8 + 8 significant bits, so the
//    f32 product readers form is exact.
#include <cstdint>
#include <string>

namespace specula {

enum class KvType { F32, Bf16, Q8 };

inline constexpr int64_t kKvQ8Block = 32;  // elements per q8 scale

// "f32", "bf16" or "q8"; throws specula::Error naming the value.
KvType parse_kv_type(const std::string& text);
const char* kv_type_name(KvType t);

// Bytes of one KV head's stored row of head_dim elements.
inline int64_t kv_head_row_bytes(KvType t, int64_t head_dim) {
  switch (t) {
    case KvType::Bf16: return 2 * head_dim;
    case KvType::Q8: return head_dim + head_dim / kKvQ8Block * 2;
    default: return 4 * head_dim;
  }
}
// Whether rows of head_dim elements can be stored as t (q8: a multiple of 32).
inline bool kv_type_fits(KvType t, int64_t head_dim) { return t != KvType::Q8 || head_dim % kKvQ8Block == 0; }

// A q8 row (see above) of the n floats of x (n a multiple of 32), and back to f32 exactly.
void kv_q8_quantize_row(const float* x, int64_t n, uint8_t* row);
void kv_q8_dequantize_row(const uint8_t* row, int64_t n, float* out);

// A row of n floats stored as t (kv_head_row_bytes(t, n) bytes), and a stored row back to floats
// exactly.
void kv_row_from_f32(KvType t, const float* x, int64_t n, void* row);
void kv_row_to_f32(KvType t, const void* row, int64_t n, float* out);

}  // namespace specula
