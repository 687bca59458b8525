#pragma once
// Elementwise activations (docs/gemma4.md §5.1): Hugging Face's formulas in f32, exact constants.
#include <cstdint>

namespace specula {

// tanh in f32 without a libm call, so loops over it vectorize: within a few ulp of tanh (tested
// against std::tanh), odd, NaN in -> NaN out, +-1 for large |x|.
float tanh_f32(float x);

// gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
float gelu_tanh(float x);

// out[i] = gelu_tanh(gate[i]) * up[i]  (the GeGLU product); out may alias gate or up.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);

// x[i] = gelu_tanh(x[i]).
void gelu_tanh_inplace(float* x, int64_t n);

// Final logit soft-capping: x[i] = cap * tanh(x[i] / cap).
void softcap_inplace(float* x, int64_t n, float cap);

}  // namespace specula
