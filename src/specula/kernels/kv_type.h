#pragma once
// The element type of the KV cache rows. F32 keeps the rows as the attention block computed them;
// Bf16 rounds each element once when the row is written (round to nearest even) and halves the
// cache's memory and the bytes attention reads per key. Readers widen bf16 exactly (a 16-bit
// shift), so attention over a bf16 store gives the bytes of attention over an f32 store holding
// the rounded values, and batch invariance holds for both types.
#include <cstdint>
#include <string>

namespace specula {

enum class KvType { F32, Bf16 };

// "f32" or "bf16"; throws specula::Error naming the value.
KvType parse_kv_type(const std::string& text);
const char* kv_type_name(KvType t);
inline int64_t kv_type_bytes(KvType t) { return t == KvType::Bf16 ? 2 : 4; }

}  // namespace specula
