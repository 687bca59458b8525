// Scalar reference of the fast-precision math (kernels/matmul.h): what the fast kernels compute,
// written plainly, independent of the CPU. Sums are float64 so the reference's own rounding is
// negligible next to the kernels' f32 accumulation.
#include <cmath>
#include <vector>

#include "specula/kernels/matmul.h"
#include "specula/kernels/matmul_kernels.h"
#include "specula/kernels/quant.h"
#include "specula/util/half.h"

namespace specula::reference {

namespace {

// The activation quantization of one group: scale s and codes xq (x ~ s * xq).
float quantize_group(const float* x, int gs, float levels, int16_t* xq) {
  float amax = 0.0f;
  for (int j = 0; j < gs; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float inv = amax > 0.0f ? levels / amax : 0.0f;
  for (int j = 0; j < gs; ++j) xq[j] = static_cast<int16_t>(std::nearbyint(x[j] * inv));
  return amax / levels;
}

// Row n's scale or bias g widened to f32.
float group_param(const WeightMatrix& w, const void* base, int64_t n, int64_t g) {
  const int64_t i = n * w.groups_per_row() + g;
  if (w.scale_dtype == DType::F32) return static_cast<const float*>(base)[i];
  const uint16_t h = static_cast<const uint16_t*>(base)[i];
  return w.scale_dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// levels: detail::kActivationLevels (int16 codes) or kActivationLevels8 (int8 codes).
void affine_quantized_x(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy,
                        float levels) {
  const int64_t k = w.cols, groups = w.groups_per_row();
  const int gs = w.group_size;
  std::vector<int16_t> xq(static_cast<size_t>(k));
  std::vector<float> xscale(static_cast<size_t>(groups));
  std::vector<double> xsum(static_cast<size_t>(groups));
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * ldx;
    for (int64_t g = 0; g < groups; ++g) {
      xscale[g] = quantize_group(xi + g * gs, gs, levels, xq.data() + g * gs);
      // The bias multiplies the quantized activations too: y is the dequantized weights times them.
      int64_t code_sum = 0;
      for (int j = 0; j < gs; ++j) code_sum += xq[g * gs + j];
      xsum[g] = static_cast<double>(xscale[g]) * static_cast<double>(code_sum);
    }
    for (int64_t n = 0; n < w.rows; ++n) {
      const auto* words = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w.data) + n * w.row_bytes());
      double acc = 0.0;
      for (int64_t g = 0; g < groups; ++g) {
        int64_t isum = 0;
        for (int64_t j = g * gs; j < (g + 1) * gs; ++j) isum += int64_t{unpack_code(words, w.bits, j)} * xq[j];
        const double scale = group_param(w, w.scales, n, g);
        const double bias = group_param(w, w.biases, n, g);
        acc += scale * static_cast<double>(xscale[g]) * static_cast<double>(isum) + bias * xsum[g];
      }
      y[i * ldy + n] = static_cast<float>(acc);
    }
  }
}

void bf16_dense(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy) {
  const int64_t k = w.cols;
  const auto* wdata = static_cast<const uint16_t*>(w.data);
  std::vector<float> xr(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const float hi = bf16_to_f32(f32_to_bf16(x[i * ldx + j]));
      xr[j] = hi + bf16_to_f32(f32_to_bf16(x[i * ldx + j] - hi));  // exact: the lo term is tiny
    }
    for (int64_t n = 0; n < w.rows; ++n) {
      double acc = 0.0;
      for (int64_t j = 0; j < k; ++j) acc += static_cast<double>(bf16_to_f32(wdata[n * k + j])) * xr[j];
      y[i * ldy + n] = static_cast<float>(acc);
    }
  }
}

}  // namespace

void matmul_fast(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy,
                 Precision precision) {
  if (w.format == WeightFormat::Affine && is_supported_bits(w.bits)) {
    const bool int8 = precision == Precision::Int8;
    affine_quantized_x(x, m, ldx, w, y, ldy, int8 ? detail::kActivationLevels8 : detail::kActivationLevels);
  } else if (w.format == WeightFormat::BF16) {
    bf16_dense(x, m, ldx, w, y, ldy);
  } else {
    matmul(x, m, ldx, w, y, ldy);
  }
}

}  // namespace specula::reference
