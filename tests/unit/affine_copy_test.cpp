// Affine copies of dense matrices made at load (kernels/affine_copy.h): values on the copy's grid
// come back exactly, others within half a step of the rounded (scale, bias), constant groups
// exactly, and matrices the copy cannot take are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "specula/kernels/affine_copy.h"
#include "specula/kernels/quant.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

WeightMatrix bf16_matrix(const std::vector<uint16_t>& values, int64_t rows, int64_t cols) {
  WeightMatrix w;
  w.format = WeightFormat::BF16;
  w.rows = rows;
  w.cols = cols;
  w.data = values.data();
  return w;
}

std::vector<float> dequantized(const WeightMatrix& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, out.data() + r * w.cols);
  return out;
}

TEST(AffineCopy, ValuesOnTheGridComeBackExactly) {
  // Every group: bias b and step s exact in bf16, codes covering 0..levels, so min = b and
  // max = b + levels * s, and each value b + q * s is exact in bf16 and in f32 arithmetic.
  for (int bits : {4, 8}) {
    const int levels = (1 << bits) - 1;
    const int64_t rows = 3, cols = 128, group = 64;
    std::vector<uint16_t> values(static_cast<size_t>(rows * cols));
    std::mt19937 rng(bits);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < cols / group; ++g) {
        const float bias = -static_cast<float>(1 + r + g);  // small integers: exact
        const float step = std::ldexp(1.0f, -static_cast<int>(3 + g));
        for (int64_t j = 0; j < group; ++j) {
          const int q = j == 0 ? 0 : j == 1 ? levels : static_cast<int>(rng() % (levels + 1));
          values[static_cast<size_t>(r * cols + g * group + j)] = f32_to_bf16(bias + static_cast<float>(q) * step);
        }
      }
    }
    ThreadPool pool(2);
    const WeightMatrix dense = bf16_matrix(values, rows, cols);
    const AffineCopy copy(dense, bits, static_cast<int>(group), pool);
    EXPECT_EQ(copy.matrix().format, WeightFormat::Affine);
    EXPECT_EQ(copy.matrix().bits, bits);
    EXPECT_EQ(dequantized(copy.matrix()), dequantized(dense)) << bits << " bits";
  }
}

TEST(AffineCopy, OtherValuesWithinHalfAStepAndConstantGroupsExact) {
  const int64_t rows = 17, cols = 192, group = 64;
  std::vector<uint16_t> values(static_cast<size_t>(rows * cols));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (auto& v : values) v = f32_to_bf16(normal(rng));
  for (int64_t j = 0; j < group; ++j) values[static_cast<size_t>(5 * cols + j)] = f32_to_bf16(0.375f);
  const WeightMatrix dense = bf16_matrix(values, rows, cols);
  const std::vector<float> ref = dequantized(dense);
  ThreadPool pool(2);
  for (int bits : {4, 8}) {
    const AffineCopy copy(dense, bits, static_cast<int>(group), pool);
    const std::vector<float> got = dequantized(copy.matrix());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < cols / group; ++g) {
        const auto p = static_cast<size_t>(r * (cols / group) + g);
        const float scale = bf16_to_f32(static_cast<const uint16_t*>(copy.matrix().scales)[p]);
        float largest = 0.0f;
        for (int64_t j = 0; j < group; ++j)
          largest = std::max(largest, std::fabs(ref[static_cast<size_t>(r * cols + g * group + j)]));
        // Half a step inside the grid; rounding bias and scale to bf16 (relative 2^-8) can move the
        // grid's ends by up to 2^-8 (|bias| + levels * scale).
        const float bound = 0.5f * scale + (largest + static_cast<float>((1 << bits) - 1) * scale) / 256.0f;
        for (int64_t j = 0; j < group; ++j) {
          const auto i = static_cast<size_t>(r * cols + g * group + j);
          ASSERT_LE(std::fabs(got[i] - ref[i]), bound) << bits << " bits, row " << r << ", column " << g * group + j;
        }
      }
    }
    for (int64_t j = 0; j < group; ++j) EXPECT_EQ(got[static_cast<size_t>(5 * cols + j)], 0.375f);
  }
}

TEST(AffineCopy, RefusesWhatItCannotTake) {
  std::vector<uint16_t> values(2 * 96, f32_to_bf16(1.0f));
  ThreadPool pool(1);
  EXPECT_FALSE(affine_copyable(bf16_matrix(values, 2, 96), 64));
  EXPECT_THROW(AffineCopy(bf16_matrix(values, 2, 96), 4, 64, pool), Error);
  EXPECT_TRUE(affine_copyable(bf16_matrix(values, 2, 96), 32));
  EXPECT_THROW(AffineCopy(bf16_matrix(values, 2, 96), 3, 32, pool), Error);
  const AffineCopy copy(bf16_matrix(values, 2, 96), 4, 32, pool);
  EXPECT_FALSE(affine_copyable(copy.matrix(), 32)) << "an affine matrix is not dense";
}

}  // namespace
}  // namespace specula
