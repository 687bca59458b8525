#include "specula/kernels/activation.h"

#include <cstdint>

#include "specula/kernels/activation_kernels.h"
#include "specula/kernels/isa.h"

namespace specula {

using detail::activation_body::gelu_body;
using detail::activation_body::tanh_body;

namespace {
// The AVX-512 build of the same loops (same bytes, 16 lanes) where the CPU has it.
bool wide() {
#if defined(SPECULA_X86)
  return active_isa() == Isa::Avx512;
#else
  return false;
#endif
}
}  // namespace

float tanh_f32(float x) { return tanh_body(x); }

float gelu_tanh(float x) { return gelu_body(x); }

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
#if defined(SPECULA_X86)
  if (wide()) return detail::gelu_tanh_mul_avx512(gate, up, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_body(gate[i]) * up[i];
}

void gelu_tanh_inplace(float* x, int64_t n) {
#if defined(SPECULA_X86)
  if (wide()) return detail::gelu_tanh_inplace_avx512(x, n);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_body(x[i]);
}

void softcap_inplace(float* x, int64_t n, float cap) {
#if defined(SPECULA_X86)
  if (wide()) return detail::softcap_inplace_avx512(x, n, cap);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] = cap * tanh_body(x[i] / cap);
}

}  // namespace specula
