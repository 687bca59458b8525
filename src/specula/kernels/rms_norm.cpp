#include "specula/kernels/rms_norm.h"

#include <cmath>

namespace specula {

void rms_norm(const float* x, int64_t rows, int64_t dim, int64_t ld_x, const float* weight, float eps, float* y,
              int64_t ld_y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ld_x;
    float* yr = y + r * ld_y;
    float sum = 0.0f;
    for (int64_t j = 0; j < dim; ++j) sum += xr[j] * xr[j];
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    if (weight != nullptr) {
      for (int64_t j = 0; j < dim; ++j) yr[j] = (xr[j] * inv) * weight[j];
    } else {
      for (int64_t j = 0; j < dim; ++j) yr[j] = xr[j] * inv;
    }
  }
}

}  // namespace specula
