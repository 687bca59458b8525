#pragma once
// Tensor element types that appear in safetensors files specula reads.
#include <cstddef>
#include <optional>
#include <string_view>

namespace specula {

enum class DType { BF16, F16, F32, F64, U8, I8, U32, I32, I64 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);                     // safetensors spelling: "BF16", "U32", ...
std::optional<DType> parse_dtype(std::string_view name);  // nullopt for unknown spellings

// A floating-point element type (F64 included).
inline bool is_float_dtype(DType t) {
  return t == DType::BF16 || t == DType::F16 || t == DType::F32 || t == DType::F64;
}

}  // namespace specula
