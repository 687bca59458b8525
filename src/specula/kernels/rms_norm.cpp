#include "specula/kernels/rms_norm.h"

#include <cmath>

namespace specula {

namespace {

constexpr int kLanes = 16;

// sum(x[j]^2): element j goes to partial sum j % 16, and the 16 sums are folded pairwise
// (part[i] += part[i + width] for width 8, 4, 2, 1). Independent partial sums let the compiler
// keep them in vector registers instead of one chain of dependent adds as long as the row.
float sum_of_squares(const float* x, int64_t n) {
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) part[l] += x[j + l] * x[j + l];
  }
  for (int l = 0; j < n; ++j, ++l) part[l] += x[j] * x[j];
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) part[i] += part[i + width];
  }
  return part[0];
}

}  // namespace

void rms_norm(const float* x, int64_t rows, int64_t dim, int64_t ld_x, const float* weight, float eps, float* y,
              int64_t ld_y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ld_x;
    float* yr = y + r * ld_y;
    const float inv = 1.0f / std::sqrt(sum_of_squares(xr, dim) / static_cast<float>(dim) + eps);
    if (weight != nullptr) {
      for (int64_t j = 0; j < dim; ++j) yr[j] = (xr[j] * inv) * weight[j];
    } else {
      for (int64_t j = 0; j < dim; ++j) yr[j] = xr[j] * inv;
    }
  }
}

}  // namespace specula
