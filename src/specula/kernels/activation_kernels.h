#pragma once
// Internal: the bodies of the elementwise activations, shared by kernels/activation.cpp (portable
// build flags) and activation_avx512.cpp (the same loops vectorized 16 wide), and the AVX-512
// entry points activation.cpp dispatches to. Both files are built without FMA contraction, so
// every operation rounds as written and the two give the same bytes. The helpers have internal
// linkage and use compiler builtins only: no inline function with external linkage may be
// compiled with AVX-512 flags (the linker could keep that copy for the portable callers).
#include <cstdint>

namespace specula::detail {

namespace activation_body {

// Exact constants rounded once to f32 (docs/gemma4.md §5.1: no bf16 rounding of the constants).
constexpr float kSqrt2OverPi = static_cast<float>(0.79788456080286535588);  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// tanh in f32 without a libm call, within a few ulp of tanh.
[[gnu::always_inline]] static inline float tanh_body(float x) {
  const float a = __builtin_fabsf(x);
  // |x| < 0.25: the odd Taylor series to x^11 (the next term is below 2^-24 relative there).
  const float x2 = x * x;
  const float small =
      x +
      x * x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835 + x2 * (-1382.0f / 155925)))));
  // Otherwise tanh(a) = m / (m + 2) with m = exp(2a) - 1 >= 0.64 (no cancellation worth a bit),
  // exp(y) = 2^k exp(r): k = nearest(y / ln 2) by the 1.5 * 2^23 rounding trick, r = y - k ln 2
  // in two parts (|r| <= ln 2 / 2), exp(r) by its Taylor series to r^8.
  const float twice = 2.0f * a;
  const float y = 88.0f < twice ? 88.0f : twice;  // tanh(44) == 1 in f32; keeps 2^k finite
  const float k = (y * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (y - k * 0.693145751953125f) - k * 1.42860682030941723e-6f;
  const float p =
      1.0f +
      r * (1.0f + r * (0.5f + r * (1.0f / 6 +
                                   r * (1.0f / 24 + r * (1.0f / 120 +
                                                         r * (1.0f / 720 + r * (1.0f / 5040 + r * (1.0f / 40320))))))));
  // A NaN input makes k NaN, whose conversion to int is undefined: convert 0 instead (r, hence p
  // and the result, stay NaN).
  const float k_finite = k == k ? k : 0.0f;
  const float scale = __builtin_bit_cast(float, (static_cast<int32_t>(k_finite) + 127) << 23);
  const float m = p * scale - 1.0f;
  const float large = __builtin_copysignf(m / (m + 2.0f), x);
  return a < 0.25f ? small : large;  // NaN: large, which is NaN (r is)
}

// gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
[[gnu::always_inline]] static inline float gelu_body(float x) {
  const float u = x + kGeluCubic * (x * x * x);
  return 0.5f * x * (1.0f + tanh_body(kSqrt2OverPi * u));
}

}  // namespace activation_body

#if defined(SPECULA_X86)
void gelu_tanh_mul_avx512(const float* gate, const float* up, float* out, int64_t n);
void gelu_tanh_inplace_avx512(float* x, int64_t n);
void softcap_inplace_avx512(float* x, int64_t n, float cap);
#endif

}  // namespace specula::detail
