#include "specula/kernels/kv_type.h"

#include <cmath>
#include <cstring>

#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

KvType parse_kv_type(const std::string& text) {
  if (text == "f32") return KvType::F32;
  if (text == "bf16") return KvType::Bf16;
  if (text == "q8") return KvType::Q8;
  fail("KV cache type '{}' is not one of 'f32', 'bf16', 'q8'", text);
}

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::Bf16: return "bf16";
    case KvType::Q8: return "q8";
    default: return "f32";
  }
}

void kv_q8_quantize_row(const float* x, int64_t n, uint8_t* row) {
  auto* codes = reinterpret_cast<int8_t*>(row);
  for (int64_t b = 0; b < n / kKvQ8Block; ++b) {
    const float* xb = x + b * kKvQ8Block;
    float amax = 0.0f;
    for (int64_t i = 0; i < kKvQ8Block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const uint16_t scale_bits = f32_to_bf16(amax / 127.0f);
    const float scale = bf16_to_f32(scale_bits);
    for (int64_t i = 0; i < kKvQ8Block; ++i) {
      float q = scale > 0.0f && std::isfinite(scale) ? xb[i] / scale : 0.0f;
      q = q != q ? 0.0f : std::min(127.0f, std::max(-127.0f, q));
      codes[b * kKvQ8Block + i] = static_cast<int8_t>(std::nearbyint(q));
    }
    std::memcpy(row + n + 2 * b, &scale_bits, 2);
  }
}

void kv_q8_dequantize_row(const uint8_t* row, int64_t n, float* out) {
  const auto* codes = reinterpret_cast<const int8_t*>(row);
  for (int64_t b = 0; b < n / kKvQ8Block; ++b) {
    uint16_t scale_bits;
    std::memcpy(&scale_bits, row + n + 2 * b, 2);
    const float scale = bf16_to_f32(scale_bits);
    for (int64_t i = 0; i < kKvQ8Block; ++i)
      out[b * kKvQ8Block + i] = static_cast<float>(codes[b * kKvQ8Block + i]) * scale;
  }
}

void kv_row_from_f32(KvType t, const float* x, int64_t n, void* row) {
  switch (t) {
    case KvType::Bf16: f32_to_bf16_row(x, n, static_cast<uint16_t*>(row)); break;
    case KvType::Q8: kv_q8_quantize_row(x, n, static_cast<uint8_t*>(row)); break;
    default: std::memcpy(row, x, static_cast<size_t>(n) * sizeof(float));
  }
}

void kv_row_to_f32(KvType t, const void* row, int64_t n, float* out) {
  switch (t) {
    case KvType::Bf16: bf16_to_f32_row(static_cast<const uint16_t*>(row), n, out); break;
    case KvType::Q8: kv_q8_dequantize_row(static_cast<const uint8_t*>(row), n, out); break;
    default: std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
  }
}

}  // namespace specula
