#include "specula/kernels/activation.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace specula {

namespace {
// Exact constants rounded once to f32 (Part I #1: no bf16 rounding of the constants).
const float kSqrt2OverPi = static_cast<float>(std::sqrt(2.0 / 3.14159265358979323846));
constexpr float kGeluCubic = 0.044715f;

// tanh_f32's body, inlined into the loops below so that they vectorize.
[[gnu::always_inline]] inline float tanh_inline(float x) {
  const float a = std::fabs(x);
  // |x| < 0.25: the odd Taylor series to x^11 (the next term is below 2^-24 relative there).
  const float x2 = x * x;
  const float small =
      x + x * x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835 + x2 * (-1382.0f / 155925)))));
  // Otherwise tanh(a) = m / (m + 2) with m = exp(2a) - 1 >= 0.64 (no cancellation worth a bit),
  // exp(y) = 2^k exp(r): k = nearest(y / ln 2) by the 1.5 * 2^23 rounding trick, r = y - k ln 2
  // in two parts (|r| <= ln 2 / 2), exp(r) by its Taylor series to r^8.
  const float y = std::min(2.0f * a, 88.0f);  // tanh(44) == 1 in f32; keeps 2^k finite
  const float k = (y * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (y - k * 0.693145751953125f) - k * 1.42860682030941723e-6f;
  const float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040 + r * (1.0f / 40320))))))));
  const float scale = std::bit_cast<float>((static_cast<int32_t>(k) + 127) << 23);
  const float m = p * scale - 1.0f;
  const float large = std::copysign(m / (m + 2.0f), x);
  return a < 0.25f ? small : large;  // NaN: large, which is NaN (r is)
}

[[gnu::always_inline]] inline float gelu_inline(float x) {
  const float u = x + kGeluCubic * (x * x * x);
  return 0.5f * x * (1.0f + tanh_inline(kSqrt2OverPi * u));
}

}  // namespace

float tanh_f32(float x) { return tanh_inline(x); }

float gelu_tanh(float x) { return gelu_inline(x); }

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_inline(gate[i]) * up[i];
}

void gelu_tanh_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_inline(x[i]);
}

void softcap_inplace(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * tanh_inline(x[i] / cap);
}

}  // namespace specula
