// Shared-factor scales (kernels/shared_scales.h): the values of GGUF K-quant sub-blocks factor
// exactly, signs of zeros included, and values that do not factor are refused.
#include "specula/kernels/shared_scales.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "specula/util/half.h"

namespace specula {
namespace {

// factor * multiplier gives each value back bit for bit.
void expect_exact(const std::vector<float>& values) {
  float factor = 0.0f;
  std::vector<int8_t> m(values.size());
  ASSERT_TRUE(factor_shared_scale(values.data(), static_cast<int>(values.size()), factor, m.data()))
      << ::testing::PrintToString(values);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(factor * static_cast<float>(m[i])), std::bit_cast<uint32_t>(values[i]))
        << i << ": " << values[i] << " from " << factor << " * " << int{m[i]};
  }
}

bool factors(const std::vector<float>& values) {
  float factor = 0.0f;
  std::vector<int8_t> m(values.size());
  return factor_shared_scale(values.data(), static_cast<int>(values.size()), factor, m.data());
}

// An f16 value of either sign whose magnitude is spread over normal and subnormal f16 exponents.
float random_f16(std::mt19937& rng, bool positive) {
  uint16_t h = static_cast<uint16_t>(rng() % 0x7c00u);  // finite
  if (!positive && rng() % 2 == 1) h |= 0x8000u;
  return f16_to_f32(h);
}

TEST(SharedScales, KQuantSubBlocksFactorExactly) {
  std::mt19937 rng(61);
  for (int trial = 0; trial < 2000; ++trial) {
    // Q4_K / Q5_K: scale d * sc and bias -(dmin * m), sc and m of 6 bits (zeros included).
    const float d = random_f16(rng, trial % 3 != 0), dmin = random_f16(rng, true);
    std::vector<float> scales(8), biases(8);
    for (int s = 0; s < 8; ++s) {
      scales[s] = d * static_cast<float>(rng() % 64);
      biases[s] = -(dmin * static_cast<float>(rng() % 64));
    }
    expect_exact(scales);
    expect_exact(biases);
    // Q6_K: scale d * sc with sc a signed byte, bias -32 * scale.
    std::vector<float> q6_scales(16), q6_biases(16);
    for (int s = 0; s < 16; ++s) {
      q6_scales[s] = d * static_cast<float>(static_cast<int8_t>(rng()));
      q6_biases[s] = -32.0f * q6_scales[s];
    }
    expect_exact(q6_scales);
    expect_exact(q6_biases);
  }
}

TEST(SharedScales, ZerosKeepTheirSign) {
  expect_exact({0.0f, 0.0f});
  expect_exact({-0.0f, -0.0f, -0.0f});
  expect_exact({-0.0f, -0.75f, -1.5f});  // -(dmin * 0) next to -(dmin * m)
  expect_exact({0.0f, -3.0f, 5.0f});
  EXPECT_FALSE(factors({0.0f, -0.0f, 1.0f}));
}

TEST(SharedScales, ValuesWithoutASmallCommonFactorAreRefused) {
  EXPECT_FALSE(factors({1.0f, 1000.0f}));      // 1000 is beyond int8
  EXPECT_FALSE(factors({1.0f, 1.0f / 3.0f}));  // no factor with both ratios small integers
  EXPECT_FALSE(factors({1.0f, std::numeric_limits<float>::infinity()}));
  EXPECT_FALSE(factors({std::numeric_limits<float>::quiet_NaN(), 1.0f}));
  expect_exact({1.0f, 127.0f, -128.0f});
  expect_exact({std::numeric_limits<float>::denorm_min(), 3 * std::numeric_limits<float>::denorm_min()});
}

}  // namespace
}  // namespace specula
