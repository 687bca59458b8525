#include "specula/kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

bool is_supported_bits(int bits) { return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8; }

bool is_supported_group_size(int gs) { return gs == 16 || gs == 32 || gs == 64 || gs == 128; }

void pack_codes(std::span<const uint8_t> codes, int bits, std::span<uint32_t> words) {
  if (!is_supported_bits(bits)) fail("pack_codes: {} bits not supported (2,3,4,5,6,8)", bits);
  const uint64_t total_bits = codes.size() * static_cast<uint64_t>(bits);
  if (total_bits % 32 != 0) {
    fail("pack_codes: {} codes of {} bits is not a whole number of 32-bit words", codes.size(), bits);
  }
  if (words.size() != total_bits / 32) {
    fail("pack_codes: output has {} words, {} codes of {} bits need {}", words.size(), codes.size(), bits,
         total_bits / 32);
  }
  const uint32_t limit = 1u << bits;
  // LSB-first stream: codes enter a 64-bit accumulator above the bits already there, and each
  // completed 32-bit word leaves it (the stream is a whole number of words).
  uint64_t pending = 0;
  int pending_bits = 0;
  size_t word = 0;
  for (size_t j = 0; j < codes.size(); ++j) {
    const uint32_t q = codes[j];
    if (q >= limit) fail("pack_codes: code {} at index {} does not fit in {} bits", q, j, bits);
    pending |= static_cast<uint64_t>(q) << pending_bits;
    pending_bits += bits;
    if (pending_bits >= 32) {
      words[word++] = static_cast<uint32_t>(pending);
      pending >>= 32;
      pending_bits -= 32;
    }
  }
}

// Packed rows come straight from the mapped file, where a writer that does not sort tensors by
// alignment can leave them at any even offset: read words without assuming 4-byte alignment.
static inline uint32_t load_word(const uint32_t* words, size_t i) {
  uint32_t w;
  std::memcpy(&w, reinterpret_cast<const unsigned char*>(words) + i * sizeof(uint32_t), sizeof(w));
  return w;
}

uint32_t unpack_code(const uint32_t* words, int bits, int64_t j) {
  const uint64_t bit = static_cast<uint64_t>(bits) * static_cast<uint64_t>(j);
  const size_t word = bit / 32;
  const unsigned shift = bit % 32;
  uint64_t v = load_word(words, word) >> shift;
  if (shift + bits > 32) v |= static_cast<uint64_t>(load_word(words, word + 1)) << (32 - shift);
  return static_cast<uint32_t>(v & ((1u << bits) - 1u));
}

void quantize_row_affine(std::span<const float> row, int bits, int group_size, std::span<uint32_t> words,
                         std::span<float> scales, std::span<float> biases) {
  if (!is_supported_bits(bits)) fail("quantize_row_affine: {} bits not supported (2,3,4,5,6,8)", bits);
  if (!is_supported_group_size(group_size)) {
    fail("quantize_row_affine: group size {} not supported (16, 32, 64, 128)", group_size);
  }
  const size_t n = row.size();
  if (n % static_cast<size_t>(group_size) != 0) {
    fail("quantize_row_affine: row width {} is not a multiple of group size {}", n, group_size);
  }
  const size_t groups = n / group_size;
  if (scales.size() != groups || biases.size() != groups) {
    fail("quantize_row_affine: {} groups but {} scales and {} biases", groups, scales.size(), biases.size());
  }
  const float n_bins = static_cast<float>((1 << bits) - 1);
  const float eps = 1e-7f;
  std::vector<uint8_t> codes(n);
  for (size_t g = 0; g < groups; ++g) {
    const float* w = row.data() + g * group_size;
    float w_max = w[0], w_min = w[0];
    for (int j = 1; j < group_size; ++j) {
      w_max = std::max(w_max, w[j]);
      w_min = std::min(w_min, w[j]);
    }
    // MLX's fallback op: the larger-magnitude extreme becomes exactly representable;
    // when it is the maximum the scale is negative and codes count down from it.
    float scale = std::max((w_max - w_min) / n_bins, eps);
    float edge;
    if (std::fabs(w_min) > std::fabs(w_max)) {
      edge = w_min;
    } else {
      edge = w_max;
      scale = -scale;
    }
    const float q0 = std::nearbyint(edge / scale);
    float bias = 0.0f;
    if (q0 != 0.0f) {
      scale = edge / q0;
      bias = edge;
    }
    for (int j = 0; j < group_size; ++j) {
      const float q = std::nearbyint((w[j] - bias) / scale);
      codes[g * group_size + j] = static_cast<uint8_t>(std::clamp(q, 0.0f, n_bins));
    }
    scales[g] = scale;
    biases[g] = bias;
  }
  pack_codes(codes, bits, words);
}

namespace {

float widen(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F32: {
      float v;  // unaligned-safe (see load_word)
      std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(float), sizeof(v));
      return v;
    }
    default: break;
  }
  fail("affine weights: scale dtype {} not supported (BF16, F16, F32)", dtype_name(t));
}

}  // namespace

void dequantize_row(const WeightMatrix& w, int64_t row, float* out) {
  if (row < 0 || row >= w.rows) fail("dequantize_row: row {} is outside the matrix's {} rows", row, w.rows);
  const int64_t k = w.cols;
  switch (w.format) {
    case WeightFormat::F32: std::memcpy(out, static_cast<const float*>(w.data) + row * k, k * sizeof(float)); return;
    case WeightFormat::BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + row * k;
      for (int64_t j = 0; j < k; ++j) out[j] = bf16_to_f32(p[j]);
      return;
    }
    case WeightFormat::F16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + row * k;
      for (int64_t j = 0; j < k; ++j) out[j] = f16_to_f32(p[j]);
      return;
    }
    case WeightFormat::Affine: break;
  }
  if (!is_supported_bits(w.bits) || !is_supported_group_size(w.group_size) || k % w.group_size != 0) {
    fail("dequantize_row: unsupported affine layout (bits {}, group size {}, width {})", w.bits, w.group_size, k);
  }
  const uint32_t* words = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w.data) + row * w.row_bytes());
  const int64_t groups = w.groups_per_row();
  for (int64_t g = 0; g < groups; ++g) {
    const float s = widen(w.scales, w.scale_dtype, row * groups + g);
    const float b = widen(w.biases, w.scale_dtype, row * groups + g);
    for (int64_t j = g * w.group_size; j < (g + 1) * w.group_size; ++j) {
      out[j] = static_cast<float>(unpack_code(words, w.bits, j)) * s + b;
    }
  }
}

void gather_rows(const WeightMatrix& table, const int32_t* ids, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= table.rows) {
      fail("gather_rows: id {} at position {} is outside the table's {} rows", ids[i], i, table.rows);
    }
  }
  for (int64_t i = 0; i < n; ++i) dequantize_row(table, ids[i], out + i * table.cols);
}

}  // namespace specula
