#include "specula/io/dtype.h"

#include <array>

namespace specula {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};

// Spellings as written by the safetensors reference writer (case-sensitive).
constexpr std::array<DTypeInfo, 9> kDTypes = {{
    {DType::BF16, "BF16", 2},
    {DType::F16, "F16", 2},
    {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},
    {DType::U8, "U8", 1},
    {DType::I8, "I8", 1},
    {DType::U32, "U32", 4},
    {DType::I32, "I32", 4},
    {DType::I64, "I64", 8},
}};

const DTypeInfo& info(DType t) {
  for (const auto& i : kDTypes)
    if (i.type == t) return i;
  // Unreachable for valid enum values; keep a defined answer for casted garbage.
  return kDTypes[2];
}
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }

std::string_view dtype_name(DType t) { return info(t).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kDTypes)
    if (i.name == name) return i.type;
  return std::nullopt;
}

}  // namespace specula
