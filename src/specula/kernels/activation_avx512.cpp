// The elementwise activations of kernels/activation.cpp compiled for AVX-512 (the loops vectorize
// 16 wide). The bodies are those of activation_kernels.h and this file is built without FMA
// contraction (src/CMakeLists.txt), so the bytes equal the portable build's.
#include "specula/kernels/activation_kernels.h"

namespace specula::detail {

using activation_body::gelu_body;
using activation_body::tanh_body;

void gelu_tanh_mul_avx512(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_body(gate[i]) * up[i];
}

void gelu_tanh_inplace_avx512(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_body(x[i]);
}

void softcap_inplace_avx512(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * tanh_body(x[i] / cap);
}

}  // namespace specula::detail
