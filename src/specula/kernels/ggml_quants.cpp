#include "specula/kernels/ggml_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

namespace {

constexpr const char* kSupportedGgmlTypes = "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K";

// Blocks are copied in: GGUF data is only as aligned as the file's alignment says.
template <typename Block>
void store_block(std::byte* p, int64_t i, const Block& b) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
}

int nearest(float x) { return static_cast<int>(std::nearbyint(x)); }
int clamp_int(int v, int lo, int hi) { return std::min(std::max(v, lo), hi); }

// The value of largest magnitude, with its sign (the symmetric quantizers map it to the most
// negative code, as ggml's do, so the other side keeps one code less).
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// ----- dequantization

void dq_q4_0(const std::byte* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const auto b = load_ggml_block<BlockQ4_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>((b.qs[j] & 0x0f) - 8);
      y[j + 16] = d * static_cast<float>((b.qs[j] >> 4) - 8);
    }
  }
}

void dq_q4_1(const std::byte* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const auto b = load_ggml_block<BlockQ4_1>(src, i);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(b.qs[j] & 0x0f) + m;
      y[j + 16] = d * static_cast<float>(b.qs[j] >> 4) + m;
    }
  }
}

void dq_q5_0(const std::byte* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const auto b = load_ggml_block<BlockQ5_0>(src, i);
    const float d = f16_to_f32(b.d);
    const uint32_t qh = q5_high_bits(b.qh);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int q1 = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(q0 - 16);
      y[j + 16] = d * static_cast<float>(q1 - 16);
    }
  }
}

void dq_q5_1(const std::byte* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const auto b = load_ggml_block<BlockQ5_1>(src, i);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    const uint32_t qh = q5_high_bits(b.qh);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (b.qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int q1 = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(q0) + m;
      y[j + 16] = d * static_cast<float>(q1) + m;
    }
  }
}

void dq_q8_0(const std::byte* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const auto b = load_ggml_block<BlockQ8_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(b.qs[j]);
  }
}

void dq_q4_k(const std::byte* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_ggml_block<BlockQ4_K>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = b.qs + 32 * c;
      uint8_t sc, mn;
      get_scale_min_k4(2 * c, b.scales, &sc, &mn);
      const float d1 = d * sc, m1 = dmin * mn;
      get_scale_min_k4(2 * c + 1, b.scales, &sc, &mn);
      const float d2 = d * sc, m2 = dmin * mn;
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
      y += 64;
    }
  }
}

void dq_q5_k(const std::byte* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_ggml_block<BlockQ5_K>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = b.qs + 32 * c;
      uint8_t sc, mn;
      get_scale_min_k4(2 * c, b.scales, &sc, &mn);
      const float d1 = d * sc, m1 = dmin * mn;
      get_scale_min_k4(2 * c + 1, b.scales, &sc, &mn);
      const float d2 = d * sc, m2 = dmin * mn;
      for (int l = 0; l < 32; ++l) {
        const int lo = (q[l] & 0x0f) | (((b.qh[l] >> (2 * c)) & 1) << 4);
        const int hi = (q[l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4);
        y[l] = d1 * static_cast<float>(lo) - m1;
        y[l + 32] = d2 * static_cast<float>(hi) - m2;
      }
      y += 64;
    }
  }
}

void dq_q6_k(const std::byte* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_ggml_block<BlockQ6_K>(src, i);
    const float d = f16_to_f32(b.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      const int8_t* sc = b.scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[s] * q1);
        y[l + 32] = d * static_cast<float>(sc[s + 2] * q2);
        y[l + 64] = d * static_cast<float>(sc[s + 4] * q3);
        y[l + 96] = d * static_cast<float>(sc[s + 6] * q4);
      }
      y += 128;
    }
  }
}

// ----- quantization

void q_q4_0(const float* x, std::byte* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    BlockQ4_0 b{};
    b.d = f32_to_f16(signed_absmax(x, 32) / -8.0f);
    const float d = f16_to_f32(b.d), id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; ++j) {
      const int q0 = clamp_int(nearest(x[j] * id) + 8, 0, 15);
      const int q1 = clamp_int(nearest(x[j + 16] * id) + 8, 0, 15);
      b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    store_block(dst, i, b);
  }
}

// Affine blocks (Q4_1, Q5_1): x = d * q + m with m the block minimum, q in [0, levels].
template <typename Block>
void q_affine(const float* x, std::byte* dst, int64_t nb, int levels) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const auto [lo, hi] = std::minmax_element(x, x + 32);
    Block b{};
    b.d = f32_to_f16((*hi - *lo) / static_cast<float>(levels));
    b.m = f32_to_f16(*lo);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m), id = d != 0 ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = clamp_int(nearest((x[j] - m) * id), 0, levels);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    if constexpr (requires { b.qh; }) std::memcpy(b.qh, &qh, 4);
    store_block(dst, i, b);
  }
}

void q_q5_0(const float* x, std::byte* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    BlockQ5_0 b{};
    b.d = f32_to_f16(signed_absmax(x, 32) / -16.0f);
    const float d = f16_to_f32(b.d), id = d != 0 ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = clamp_int(nearest(x[j] * id) + 16, 0, 31);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    std::memcpy(b.qh, &qh, 4);
    store_block(dst, i, b);
  }
}

void q_q8_0(const float* x, std::byte* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    BlockQ8_0 b{};
    b.d = f32_to_f16(amax / 127.0f);
    const float d = f16_to_f32(b.d), id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(clamp_int(nearest(x[j] * id), -127, 127));
    store_block(dst, i, b);
  }
}

// Q4_K / Q5_K: per 32-element sub-block an affine (scale, -min) pair, both quantized to 6 bits
// against the super-block's d and dmin. Scales round up so the largest code still reaches the
// sub-block maximum. Codes go to q[256].
template <typename Block>
void q_k_affine(const float* x, Block& b, int levels, int q[256]) {
  float scale[8], minus_min[8], max_scale = 0, max_min = 0;
  for (int s = 0; s < 8; ++s) {
    const auto [lo, hi] = std::minmax_element(x + 32 * s, x + 32 * s + 32);
    const float mn = std::min(*lo, 0.0f);  // mins are stored as non-negative offsets
    scale[s] = (*hi - mn) / static_cast<float>(levels);
    minus_min[s] = -mn;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, minus_min[s]);
  }
  b.d = f32_to_f16(max_scale / 63.0f);
  b.dmin = f32_to_f16(max_min / 63.0f);
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  std::memset(b.scales, 0, sizeof b.scales);
  for (int s = 0; s < 8; ++s) {
    const int sc = d > 0 ? clamp_int(static_cast<int>(std::ceil(scale[s] / d)), 0, 63) : 0;
    const int mn = dmin > 0 ? clamp_int(nearest(minus_min[s] / dmin), 0, 63) : 0;
    set_scale_min_k4(s, static_cast<uint8_t>(sc), static_cast<uint8_t>(mn), b.scales);
    const float step = d * static_cast<float>(sc), offset = dmin * static_cast<float>(mn);
    const float inv = step != 0 ? 1.0f / step : 0.0f;
    for (int l = 0; l < 32; ++l) q[32 * s + l] = clamp_int(nearest((x[32 * s + l] + offset) * inv), 0, levels);
  }
}

void q_q4_k(const float* x, std::byte* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    BlockQ4_K b{};
    int q[256];
    q_k_affine(x, b, 15, q);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    store_block(dst, i, b);
  }
}

void q_q5_k(const float* x, std::byte* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    BlockQ5_K b{};
    int q[256];
    q_k_affine(x, b, 31, q);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        b.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        b.qh[l] |= static_cast<uint8_t>((((lo >> 4) & 1) << (2 * c)) | (((hi >> 4) & 1) << (2 * c + 1)));
      }
    }
    store_block(dst, i, b);
  }
}

void q_q6_k(const float* x, std::byte* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    BlockQ6_K b{};
    float scale[16], max_scale = 0;
    for (int s = 0; s < 16; ++s) {
      scale[s] = signed_absmax(x + 16 * s, 16) / -32.0f;
      max_scale = std::max(max_scale, std::fabs(scale[s]));
    }
    b.d = f32_to_f16(max_scale / 127.0f);
    const float d = f16_to_f32(b.d);
    for (int s = 0; s < 16; ++s) {
      const int sc = d > 0 ? clamp_int(nearest(scale[s] / d), -128, 127) : 0;
      b.scales[s] = static_cast<int8_t>(sc);
      const float step = d * static_cast<float>(sc), inv = step != 0 ? 1.0f / step : 0.0f;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * s + l;  // element within the super-block
        const int q = clamp_int(nearest(x[e] * inv), -32, 31) + 32;
        const int h = e / 128, c = (e % 128) / 32, k = e % 32;
        uint8_t& low = b.ql[64 * h + 32 * (c & 1) + k];
        low = static_cast<uint8_t>(low | ((q & 0x0f) << (c >= 2 ? 4 : 0)));
        b.qh[32 * h + k] = static_cast<uint8_t>(b.qh[32 * h + k] | ((q >> 4) << (2 * c)));
      }
    }
    store_block(dst, i, b);
  }
}

void check_n(GgmlType t, int64_t n, const char* what) {
  if (!ggml_dequant_supported(t))
    fail("{} {} is not supported (supported: {})", what, ggml_type_name(t), kSupportedGgmlTypes);
  if (n < 0 || n % ggml_block_size(t) != 0)
    fail("{} {}: {} elements is not a multiple of the block size {}", what, ggml_type_name(t), n, ggml_block_size(t));
}

}  // namespace

void get_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void set_scale_min_k4(int j, uint8_t scale, uint8_t min, uint8_t* q) {
  if (j < 4) {
    q[j] = static_cast<uint8_t>((q[j] & 0xc0) | (scale & 63));
    q[j + 4] = static_cast<uint8_t>((q[j + 4] & 0xc0) | (min & 63));
  } else {
    // Low 4 bits of both in byte j+4; the high 2 bits in the top bits of bytes j-4 and j.
    q[j + 4] = static_cast<uint8_t>((scale & 0x0f) | ((min & 0x0f) << 4));
    q[j - 4] = static_cast<uint8_t>((q[j - 4] & 63) | ((scale >> 4) << 6));
    q[j] = static_cast<uint8_t>((q[j] & 63) | ((min >> 4) << 6));
  }
}

bool ggml_dequant_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

void dequantize_row_ggml(GgmlType t, const void* src_v, float* out, int64_t n) {
  check_n(t, n, "dequantizing");
  const auto* src = static_cast<const std::byte*>(src_v);
  const int64_t nb = n / ggml_block_size(t);
  switch (t) {
    case GgmlType::F32: std::memcpy(out, src, static_cast<size_t>(n) * 4); break;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      break;
    case GgmlType::Q4_0: dq_q4_0(src, out, nb); break;
    case GgmlType::Q4_1: dq_q4_1(src, out, nb); break;
    case GgmlType::Q5_0: dq_q5_0(src, out, nb); break;
    case GgmlType::Q5_1: dq_q5_1(src, out, nb); break;
    case GgmlType::Q8_0: dq_q8_0(src, out, nb); break;
    case GgmlType::Q4_K: dq_q4_k(src, out, nb); break;
    case GgmlType::Q5_K: dq_q5_k(src, out, nb); break;
    case GgmlType::Q6_K: dq_q6_k(src, out, nb); break;
    default: break;  // check_n refused it
  }
}

void quantize_row_ggml(GgmlType t, const float* src, void* dst_v, int64_t n) {
  check_n(t, n, "quantizing to");
  auto* dst = static_cast<std::byte*>(dst_v);
  const int64_t nb = n / ggml_block_size(t);
  switch (t) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case GgmlType::Q4_0: q_q4_0(src, dst, nb); break;
    case GgmlType::Q4_1: q_affine<BlockQ4_1>(src, dst, nb, 15); break;
    case GgmlType::Q5_0: q_q5_0(src, dst, nb); break;
    case GgmlType::Q5_1: q_affine<BlockQ5_1>(src, dst, nb, 31); break;
    case GgmlType::Q8_0: q_q8_0(src, dst, nb); break;
    case GgmlType::Q4_K: q_q4_k(src, dst, nb); break;
    case GgmlType::Q5_K: q_q5_k(src, dst, nb); break;
    case GgmlType::Q6_K: q_q6_k(src, dst, nb); break;
    default: break;
  }
}

void dequantize_gguf_row(const GgufTensor& t, int64_t row, float* out) {
  // Names come from untrusted files: no control characters in messages.
  std::string name = t.name.substr(0, 200);
  const auto control = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; };
  std::replace_if(name.begin(), name.end(), control, '?');
  if (!ggml_dequant_supported(t.type))
    fail("tensor '{}' is {}, which specula cannot dequantize (supported: {})", name, ggml_type_name(t.type),
         kSupportedGgmlTypes);
  if (row < 0 || row >= t.rows()) fail("tensor '{}': row {} outside [0, {})", name, row, t.rows());
  dequantize_row_ggml(t.type, t.data + static_cast<uint64_t>(row) * t.row_bytes(), out, t.ne0());
}

}  // namespace specula
