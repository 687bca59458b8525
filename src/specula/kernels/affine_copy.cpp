#include "specula/kernels/affine_copy.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "specula/kernels/quant.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

namespace {

bool is_dense(const WeightMatrix& w) {
  return w.format == WeightFormat::F32 || w.format == WeightFormat::BF16 || w.format == WeightFormat::F16;
}

// One group: bf16 (scale, bias) from its range, codes as the nearest level of that rounded pair.
void quantize_group(const float* w, int n, int bits, uint8_t* codes, uint16_t& scale_out, uint16_t& bias_out) {
  const float levels = static_cast<float>((1 << bits) - 1);
  const auto [lo, hi] = std::minmax_element(w, w + n);
  const float bias = bf16_to_f32(f32_to_bf16(*lo));
  float scale = bf16_to_f32(f32_to_bf16((*hi - *lo) / levels));
  if (!(scale > 0.0f)) scale = 1.0f;  // a constant group: every code 0 reads back the bias
  for (int j = 0; j < n; ++j) {
    const float q = std::nearbyint((w[j] - bias) / scale);
    codes[j] = static_cast<uint8_t>(std::clamp(q, 0.0f, levels));
  }
  scale_out = f32_to_bf16(scale);
  bias_out = f32_to_bf16(bias);
}

}  // namespace

bool affine_copyable(const WeightMatrix& w, int group_size) {
  return is_dense(w) && w.rows > 0 && w.cols > 0 && group_size > 0 && w.cols % group_size == 0;
}

AffineCopy::AffineCopy(const WeightMatrix& dense, int bits, int group_size, ThreadPool& pool) {
  if (bits != 4 && bits != 8) fail("affine copy: {} bits (4 or 8)", bits);
  if (!is_supported_group_size(group_size)) fail("affine copy: group size {} (32, 64 or 128)", group_size);
  if (!affine_copyable(dense, group_size))
    fail("affine copy: a [{}, {}] matrix is not dense or not a whole number of groups of {}", dense.rows, dense.cols,
         group_size);
  const int64_t rows = dense.rows, cols = dense.cols;
  const int64_t row_words = cols * bits / 32, groups = cols / group_size;
  words_.resize(static_cast<size_t>(rows * row_words));
  scales_.resize(static_cast<size_t>(rows * groups));
  biases_.resize(static_cast<size_t>(rows * groups));
  pool.parallel_for(rows, 64, [&](int, int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> codes(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      dequantize_row(dense, r, row.data());
      for (int64_t g = 0; g < groups; ++g) {
        const auto i = static_cast<size_t>(r * groups + g);
        quantize_group(row.data() + g * group_size, group_size, bits, codes.data() + g * group_size, scales_[i],
                       biases_[i]);
      }
      pack_codes(codes, bits, std::span<uint32_t>(words_.data() + r * row_words, static_cast<size_t>(row_words)));
    }
  });
  matrix_.format = WeightFormat::Affine;
  matrix_.rows = rows;
  matrix_.cols = cols;
  matrix_.bits = bits;
  matrix_.group_size = group_size;
  matrix_.scale_dtype = DType::BF16;
  matrix_.data = words_.data();
  matrix_.scales = scales_.data();
  matrix_.biases = biases_.data();
}

}  // namespace specula
