#include "specula/kernels/ggml_affine.h"

#include <algorithm>
#include <cstring>

#include "specula/kernels/ggml_quants.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

namespace {

// Codes of a 32-element block whose low nibbles hold elements 0..15 and high nibbles 16..31,
// with bit 4 of element j in bit j of `high` (0 for the 4-bit types).
void nibble_codes(const uint8_t qs[16], uint32_t high, uint8_t* codes) {
  for (int j = 0; j < 16; ++j) {
    codes[j] = static_cast<uint8_t>((qs[j] & 0x0f) | (((high >> j) & 1) << 4));
    codes[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((high >> (j + 16)) & 1) << 4));
  }
}

// Q4_K / Q5_K super-block: 8 sub-blocks of 32; `qh` null for Q4_K.
void k_block(uint16_t d16, uint16_t dmin16, const uint8_t scales_k[12], const uint8_t qs[128], const uint8_t* qh,
             uint8_t* codes, float* scales, float* biases) {
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, mn;
    get_scale_min_k4(s, scales_k, &sc, &mn);
    scales[s] = d * sc;
    biases[s] = -(dmin * mn);
  }
  for (int c = 0; c < 4; ++c) {
    const uint8_t* q = qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      const int lo_hi = qh ? ((qh[l] >> (2 * c)) & 1) << 4 : 0;
      const int hi_hi = qh ? ((qh[l] >> (2 * c + 1)) & 1) << 4 : 0;
      codes[64 * c + l] = static_cast<uint8_t>((q[l] & 0x0f) | lo_hi);
      codes[64 * c + 32 + l] = static_cast<uint8_t>((q[l] >> 4) | hi_hi);
    }
  }
}

// Q6_K super-block: 16 sub-blocks of 16, each with its own signed scale; codes are the stored
// unsigned 6-bit values (q - 32 is the signed weight).
void q6_k_block(const BlockQ6_K& b, uint8_t* codes, float* scales, float* biases) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 16; ++s) {
    scales[s] = d * static_cast<float>(b.scales[s]);
    biases[s] = -32.0f * scales[s];
  }
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    uint8_t* c = codes + 128 * h;
    for (int l = 0; l < 32; ++l) {
      c[l] = static_cast<uint8_t>((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4));
      c[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
      c[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      c[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

}  // namespace

int ggml_affine_bits(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q4_K: return 4;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q5_K: return 5;
    case GgmlType::Q8_0:
    case GgmlType::Q6_K: return 8;
    default: return 0;
  }
}

int ggml_affine_group(GgmlType t) { return t == GgmlType::Q6_K ? 16 : 32; }

bool ggml_scales_share_factors(GgmlType t, const void* src_v, int64_t n) {
  const auto* src = static_cast<const std::byte*>(src_v);
  const auto finite = [](uint16_t h) { return (h & 0x7c00u) != 0x7c00u; };
  const int64_t blocks = n / 256;
  for (int64_t i = 0; i < blocks; ++i) {
    switch (t) {
      case GgmlType::Q4_K: {
        const auto b = load_ggml_block<BlockQ4_K>(src, i);
        if (!finite(b.d) || !finite(b.dmin)) return false;
        break;
      }
      case GgmlType::Q5_K: {
        const auto b = load_ggml_block<BlockQ5_K>(src, i);
        if (!finite(b.d) || !finite(b.dmin)) return false;
        break;
      }
      case GgmlType::Q6_K: {
        const auto b = load_ggml_block<BlockQ6_K>(src, i);
        if (!finite(b.d)) return false;
        if ((b.d & 0x7fffu) == 0) {
          const bool negative = std::any_of(b.scales, b.scales + 16, [](int8_t sc) { return sc < 0; });
          const bool other = std::any_of(b.scales, b.scales + 16, [](int8_t sc) { return sc >= 0; });
          if (negative && other) return false;
        }
        break;
      }
      default: return false;
    }
  }
  return n % 256 == 0;
}

void ggml_row_to_affine(GgmlType t, const void* src_v, int64_t n, uint8_t* codes, float* scales, float* biases) {
  if (ggml_affine_bits(t) == 0) fail("ggml type {} has no affine form", ggml_type_name(t));
  const int64_t group = ggml_affine_group(t);
  const int64_t bs = ggml_block_size(t);
  if (n < 0 || n % bs != 0) fail("row of {} elements is not a whole number of {} blocks", n, ggml_type_name(t));
  const auto* src = static_cast<const std::byte*>(src_v);
  const int64_t nb = n / bs;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* c = codes + i * bs;
    float* s = scales + i * bs / group;
    float* b = biases + i * bs / group;
    switch (t) {
      case GgmlType::Q4_0: {
        const auto q = load_ggml_block<BlockQ4_0>(src, i);
        nibble_codes(q.qs, 0, c);
        s[0] = f16_to_f32(q.d);
        b[0] = -8.0f * s[0];
        break;
      }
      case GgmlType::Q4_1: {
        const auto q = load_ggml_block<BlockQ4_1>(src, i);
        nibble_codes(q.qs, 0, c);
        s[0] = f16_to_f32(q.d);
        b[0] = f16_to_f32(q.m);
        break;
      }
      case GgmlType::Q5_0: {
        const auto q = load_ggml_block<BlockQ5_0>(src, i);
        nibble_codes(q.qs, q5_high_bits(q.qh), c);
        s[0] = f16_to_f32(q.d);
        b[0] = -16.0f * s[0];
        break;
      }
      case GgmlType::Q5_1: {
        const auto q = load_ggml_block<BlockQ5_1>(src, i);
        nibble_codes(q.qs, q5_high_bits(q.qh), c);
        s[0] = f16_to_f32(q.d);
        b[0] = f16_to_f32(q.m);
        break;
      }
      case GgmlType::Q8_0: {
        const auto q = load_ggml_block<BlockQ8_0>(src, i);
        for (int j = 0; j < 32; ++j) c[j] = static_cast<uint8_t>(q.qs[j] + 128);
        s[0] = f16_to_f32(q.d);
        b[0] = -128.0f * s[0];
        break;
      }
      case GgmlType::Q4_K: {
        const auto q = load_ggml_block<BlockQ4_K>(src, i);
        k_block(q.d, q.dmin, q.scales, q.qs, nullptr, c, s, b);
        break;
      }
      case GgmlType::Q5_K: {
        const auto q = load_ggml_block<BlockQ5_K>(src, i);
        k_block(q.d, q.dmin, q.scales, q.qs, q.qh, c, s, b);
        break;
      }
      case GgmlType::Q6_K: q6_k_block(load_ggml_block<BlockQ6_K>(src, i), c, s, b); break;
      default: break;
    }
  }
}

}  // namespace specula
