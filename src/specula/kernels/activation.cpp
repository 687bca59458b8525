#include "specula/kernels/activation.h"

#include <cmath>

namespace specula {

namespace {
// Exact constants rounded once to f32 (Part I #1: no bf16 rounding of the constants).
const float kSqrt2OverPi = static_cast<float>(std::sqrt(2.0 / 3.14159265358979323846));
constexpr float kGeluCubic = 0.044715f;
}  // namespace

float gelu_tanh(float x) {
  const float u = x + kGeluCubic * (x * x * x);
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * u));
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

void gelu_tanh_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_tanh(x[i]);
}

void softcap_inplace(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace specula
