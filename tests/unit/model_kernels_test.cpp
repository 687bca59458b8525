// The model's elementwise/row kernels: rms_norm, RoPE (default and proportional), gelu_tanh,
// softcap, softmax, argmax and top-k — against double-precision formulas, plus tie-breaking and
// batch invariance (a row's bytes do not depend on the other rows of the call).
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "specula/kernels/activation.h"
#include "specula/kernels/rms_norm.h"
#include "specula/kernels/rope.h"
#include "specula/kernels/softmax.h"
#include "specula/util/error.h"

namespace specula {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(RmsNorm, MatchesDoubleAndIsBatchInvariant) {
  const int64_t rows = 7, dim = 131;
  const std::vector<float> x = randn(rows * dim, 1, 3.0f);
  const std::vector<float> w = randn(dim, 2);
  std::vector<float> y(rows * dim), y_free(rows * dim);
  rms_norm(x.data(), rows, dim, dim, w.data(), 1e-6f, y.data(), dim);
  rms_norm(x.data(), rows, dim, dim, nullptr, 1e-6f, y_free.data(), dim);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t j = 0; j < dim; ++j) ms += double(x[r * dim + j]) * x[r * dim + j];
    const double inv = 1.0 / std::sqrt(ms / dim + 1e-6);
    for (int64_t j = 0; j < dim; ++j) {
      EXPECT_NEAR(y[r * dim + j], x[r * dim + j] * inv * w[j], 1e-5 * (1 + std::abs(x[r * dim + j] * inv * w[j])));
      EXPECT_NEAR(y_free[r * dim + j], x[r * dim + j] * inv, 1e-5 * (1 + std::abs(x[r * dim + j] * inv)));
    }
    // Row r alone gives the same bytes as inside the batch.
    std::vector<float> alone(dim);
    rms_norm(x.data() + r * dim, 1, dim, dim, w.data(), 1e-6f, alone.data(), dim);
    EXPECT_EQ(std::memcmp(alone.data(), y.data() + r * dim, sizeof(float) * dim), 0);
  }
}

TEST(Rope, DefaultFrequencies) {
  const RopeFrequencies f = make_rope_frequencies("default", 10000.0, 1.0, 1.0, 32, "sliding_attention");
  ASSERT_EQ(f.rotated_pairs(), 16);
  for (int j = 0; j < 16; ++j) EXPECT_DOUBLE_EQ(f.inv_freq[j], std::pow(10000.0, -2.0 * j / 32));
}

TEST(Rope, ProportionalUsesFullHeadDimAndRotatesOnlyItsPairs) {
  // Real full layers: D = 512, rho = 0.25 -> 64 rotated pairs with theta^(2j/512).
  const RopeFrequencies f = make_rope_frequencies("proportional", 1e6, 0.25, 1.0, 512, "full_attention");
  ASSERT_EQ(f.rotated_pairs(), 64);
  for (int j = 0; j < 64; ++j) EXPECT_DOUBLE_EQ(f.inv_freq[j], 1.0 / std::pow(1e6, 2.0 * j / 512));
  // Apply at position 37: coordinates [64, 256) and [320, 512) pass through unchanged.
  std::vector<float> x = randn(512, 3);
  const std::vector<float> orig = x;
  std::vector<float> c(64), s(64);
  rope_cos_sin(f, 37, c.data(), s.data());
  rope_apply(x.data(), 1, f, c.data(), s.data());
  for (int j = 0; j < 256; ++j) {
    if (j < 64) {
      const double a = 37.0 * f.inv_freq[j];
      EXPECT_NEAR(x[j], orig[j] * std::cos(a) - orig[j + 256] * std::sin(a), 1e-5);
      EXPECT_NEAR(x[j + 256], orig[j] * std::sin(a) + orig[j + 256] * std::cos(a), 1e-5);
    } else {
      EXPECT_EQ(x[j], orig[j]);
      EXPECT_EQ(x[j + 256], orig[j + 256]);
    }
  }
  // Factor divides the frequencies; bad inputs are named.
  const RopeFrequencies g = make_rope_frequencies("proportional", 1e6, 0.25, 2.0, 512, "full_attention");
  EXPECT_DOUBLE_EQ(g.inv_freq[5], f.inv_freq[5] / 2.0);
  EXPECT_THROW(make_rope_frequencies("yarn", 1e6, 1.0, 1.0, 64, "full_attention"), Error);
  EXPECT_THROW(make_rope_frequencies("default", 1e4, 1.0, 1.0, 33, "sliding_attention"), Error);
}

TEST(Rope, LargePositionAnglesStayAccurate) {
  const RopeFrequencies f = make_rope_frequencies("default", 10000.0, 1.0, 1.0, 256, "sliding_attention");
  std::vector<float> c(128), s(128);
  rope_cos_sin(f, 131071, c.data(), s.data());
  for (int j = 0; j < 128; j += 17) {
    const double a = 131071.0 * std::pow(10000.0, -2.0 * j / 256);
    EXPECT_NEAR(c[j], std::cos(a), 1e-6);
    EXPECT_NEAR(s[j], std::sin(a), 1e-6);
  }
}

TEST(Activation, GeluTanhAndSoftcap) {
  for (double x : {-6.0, -2.5, -0.3, 0.0, 0.01, 0.7, 3.0, 9.0}) {
    const double want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(gelu_tanh(static_cast<float>(x)), want, 1e-6 * (1 + std::abs(want)));
  }
  std::vector<float> g = {1.0f, -2.0f}, u = {3.0f, 0.5f}, o(2);
  gelu_tanh_mul(g.data(), u.data(), o.data(), 2);
  EXPECT_FLOAT_EQ(o[0], gelu_tanh(1.0f) * 3.0f);
  std::vector<float> l = {0.0f, 15.0f, -100.0f};
  softcap_inplace(l.data(), 3, 30.0f);
  EXPECT_EQ(l[0], 0.0f);
  EXPECT_NEAR(l[1], 30.0 * std::tanh(0.5), 1e-5);
  EXPECT_NEAR(l[2], -30.0 * std::tanh(100.0 / 30.0), 1e-5);
}

TEST(Softmax, SumsToOneAndMatchesDouble) {
  std::vector<float> x = randn(37, 4, 5.0f);
  const std::vector<float> orig = x;
  softmax_inplace(x.data(), 37);
  double m = orig[0], sum = 0;
  for (float v : orig) m = std::max<double>(m, v);
  for (float v : orig) sum += std::exp(v - m);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], std::exp(orig[i] - m) / sum, 1e-6);
}

TEST(Argmax, LowestIndexOnTies) {
  const std::vector<float> x = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  EXPECT_EQ(argmax(x.data(), 5), 1);
  const std::vector<float> n = {NAN, -1.0f, -1.0f};
  EXPECT_EQ(argmax(n.data(), 3), 1);
  std::vector<int64_t> idx(3);
  top_k(x.data(), 5, 3, idx.data());
  EXPECT_EQ(idx, (std::vector<int64_t>{1, 3, 4}));
  const std::vector<float> y = {0.5f, 0.1f, 0.9f, 0.1f};
  std::vector<int64_t> two(2);
  top_k(y.data(), 4, 2, two.data());
  EXPECT_EQ(two, (std::vector<int64_t>{2, 0}));
}

// tanh_f32 (no libm call, vectorizable) against tanh in double: within 4 ulp of the result over
// the whole range, exactly odd, saturating, NaN preserving.
TEST(ModelKernels, TanhF32IsWithinFourUlpOfTanh) {
  double worst = 0;
  for (float x = -20.0f; x <= 20.0f;
       x = std::nextafter(x, 30.0f) + (std::fabs(x) > 1e-3f ? std::fabs(x) * 1e-5f : 1e-8f)) {
    const double want = std::tanh(static_cast<double>(x));
    const float got = tanh_f32(x);
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
    worst = std::max(worst, std::fabs(got - want) / ulp);
    ASSERT_EQ(tanh_f32(-x), -got) << x;
  }
  EXPECT_LE(worst, 4.0);
  EXPECT_EQ(tanh_f32(0.0f), 0.0f);
  EXPECT_EQ(tanh_f32(INFINITY), 1.0f);
  EXPECT_EQ(tanh_f32(-INFINITY), -1.0f);
  EXPECT_EQ(tanh_f32(100.0f), 1.0f);
  EXPECT_TRUE(std::isnan(tanh_f32(NAN)));
  std::printf("tanh_f32: worst error %.2f ulp\n", worst);
  // The vectorized loops give each element the scalar function's bytes, wherever it sits.
  std::vector<float> v(1003);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.037f - 18.0f;
  std::vector<float> capped = v;
  softcap_inplace(capped.data() + 1, static_cast<int64_t>(v.size()) - 1, 30.0f);
  for (size_t i = 1; i < v.size(); ++i) ASSERT_EQ(capped[i], 30.0f * tanh_f32(v[i] / 30.0f)) << i;
}

}  // namespace
}  // namespace specula
