#pragma once
// The exponential of attention's softmax, e^x for x <= 0 (x = score - the row's maximum), written
// out so that the portable loops and the vector kernels compute it with the same operations in
// the same order (libm's expf is neither a vector function nor the same bytes as one): the bytes
// are the same on every CPU and kernel set. Each step is one rounding (the kernels are built
// without FMA contraction).
//
// e^x = 2^n * e^r with n = round(x / ln 2) and r = x - n ln 2 (ln 2 split in two, Cody and Waite,
// so n * the high part is exact), e^r from a degree-6 polynomial on |r| <= ln(2) / 2 (the
// coefficients of Cephes' expf); about 1 ulp from the exact value. Below kSoftmaxExpFloor it
// returns +0: e^x is then under the smallest normal float, and a softmax sum holds e^0 = 1.
#include <bit>
#include <cstdint>

namespace specula {

inline constexpr float kSoftmaxExpFloor = -87.0f;

namespace softmax_exp_constants {
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: (t + kRound) - kRound rounds t to an integer
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500e-4f;
inline constexpr float kP1 = 1.3981999507e-3f;
inline constexpr float kP2 = 8.3334519073e-3f;
inline constexpr float kP3 = 4.1665795894e-2f;
inline constexpr float kP4 = 1.6666665459e-1f;
inline constexpr float kP5 = 5.0000001201e-1f;
}  // namespace softmax_exp_constants

[[gnu::always_inline]] inline float softmax_exp(float x) {
  using namespace softmax_exp_constants;
  if (x != x) return x;  // NaN stays NaN
  if (x < kSoftmaxExpFloor) return 0.0f;
  const float n = (x * kLog2e + kRound) - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  const float e = (p * (r * r) + r) + 1.0f;
  // n is in [-126, 0] here: 2^n is a normal float, built from its exponent bits.
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  return e * std::bit_cast<float>(bits);
}

}  // namespace specula
