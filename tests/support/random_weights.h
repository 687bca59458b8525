#pragma once
// Random weight matrices in every WeightFormat for the kernel tests: dense values in [-1, 1);
// affine codes uniform over the bit width, scales in [-0.2, 0.2) (both signs, as MLX produces)
// and biases in [-1, 1), stored in the given scale dtype.
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "specula/io/dtype.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/weight_matrix.h"
#include "specula/util/half.h"

namespace specula::test {

// Owns the storage `w` points into (move it, never copy it).
struct RandomWeights {
  std::vector<uint8_t> data, scales, biases;
  WeightMatrix w;
};

// m x k activations uniform in [-1, 1).
inline std::vector<float> random_activations(int64_t m, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = uni(rng);
  return x;
}

// Element i of `out` as dtype t (F32, BF16 or F16).
inline void store_value(float v, DType t, std::vector<uint8_t>& out, size_t i) {
  if (t == DType::F32) {
    std::memcpy(out.data() + 4 * i, &v, 4);
  } else {
    const uint16_t h = t == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
}

// Dense formats store their values in `sd`; affine ones use bits / gs and `sd` for scales and biases.
inline RandomWeights random_weights(WeightFormat format, int bits, int gs, DType sd, int64_t rows, int64_t cols,
                                    std::mt19937& rng) {
  RandomWeights r;
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  r.w.format = format;
  r.w.rows = rows;
  r.w.cols = cols;
  if (format != WeightFormat::Affine) {
    r.data.resize(static_cast<size_t>(rows * cols) * dtype_size(sd));
    for (int64_t i = 0; i < rows * cols; ++i) store_value(uni(rng), sd, r.data, static_cast<size_t>(i));
    r.w.data = r.data.data();
    return r;
  }
  const int64_t words = cols * bits / 32;
  r.data.resize(static_cast<size_t>(rows * words) * 4);
  std::vector<uint8_t> codes(static_cast<size_t>(cols));
  for (int64_t n = 0; n < rows; ++n) {
    for (auto& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1u));
    pack_codes(codes, bits, std::span<uint32_t>(reinterpret_cast<uint32_t*>(r.data.data()) + n * words, words));
  }
  const int64_t count = rows * (cols / gs);
  r.scales.resize(static_cast<size_t>(count) * dtype_size(sd));
  r.biases.resize(static_cast<size_t>(count) * dtype_size(sd));
  for (int64_t i = 0; i < count; ++i) {
    store_value(0.2f * uni(rng), sd, r.scales, static_cast<size_t>(i));
    store_value(uni(rng), sd, r.biases, static_cast<size_t>(i));
  }
  r.w.bits = bits;
  r.w.group_size = gs;
  r.w.scale_dtype = sd;
  r.w.data = r.data.data();
  r.w.scales = r.scales.data();
  r.w.biases = r.biases.data();
  return r;
}

}  // namespace specula::test
