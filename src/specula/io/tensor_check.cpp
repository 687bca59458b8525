#include "specula/io/tensor_check.h"

#include <cstring>

#include <fmt/format.h>

namespace specula {

namespace {

// IEEE formats as bit patterns: all-ones exponent = non-finite; then a zero mantissa = infinity.
template <typename Bits>
NonFiniteCount count_bits(const std::byte* data, int64_t n, Bits exponent_mask, Bits mantissa_mask) {
  NonFiniteCount c;
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, data + i * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
    if ((v & exponent_mask) != exponent_mask) continue;
    if (v & mantissa_mask)
      ++c.nan;
    else
      ++c.inf;
    if (c.first_index < 0) c.first_index = i;
  }
  return c;
}

}  // namespace

NonFiniteCount count_non_finite(const TensorView& t) {
  if (t.data == nullptr) return {};
  const int64_t n = static_cast<int64_t>(t.nbytes / dtype_size(t.dtype));
  switch (t.dtype) {
    case DType::BF16: return count_bits<uint16_t>(t.data, n, 0x7F80, 0x007F);
    case DType::F16: return count_bits<uint16_t>(t.data, n, 0x7C00, 0x03FF);
    case DType::F32: return count_bits<uint32_t>(t.data, n, 0x7F800000u, 0x007FFFFFu);
    case DType::F64: return count_bits<uint64_t>(t.data, n, 0x7FF0000000000000ull, 0x000FFFFFFFFFFFFFull);
    default: return {};
  }
}

TensorValueCheck check_tensor_values(const TensorStore& store,
                                     const std::function<void(uint64_t done, uint64_t total)>& progress) {
  TensorValueCheck r;
  uint64_t total = 0;
  const std::vector<std::string> names = store.names();
  for (const std::string& name : names) {
    const TensorView& t = store.get(name);
    if (is_float_dtype(t.dtype)) total += t.nbytes;
  }
  for (const std::string& name : names) {
    const TensorView& t = store.get(name);
    if (!is_float_dtype(t.dtype)) continue;
    const NonFiniteCount c = count_non_finite(t);
    ++r.tensors_checked;
    r.bytes_checked += t.nbytes;
    if (c.any()) r.non_finite.push_back({t.name, t.file ? *t.file : std::string("?"), c});
    if (progress) progress(r.bytes_checked, total);
  }
  return r;
}

std::string format_non_finite(const NonFiniteTensor& t) {
  return fmt::format("{}: {} NaN, {} inf, first at element {} ({})", t.name, t.count.nan, t.count.inf,
                     t.count.first_index, t.file);
}

}  // namespace specula
