// Plain scalar reference matmul: the ground truth the optimized kernels are tested against.
#include <vector>

#include "specula/kernels/matmul.h"
#include "specula/kernels/quant.h"

namespace specula::reference {

void matmul(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t n = 0; n < w.rows; ++n) {
    // Dequantize (or widen) the weights of output feature n: w = q*scale + bias in f32.
    dequantize_row(w, n, row.data());
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * ldx;
      float acc = 0.0f;
      for (int64_t k = 0; k < w.cols; ++k) acc += xi[k] * row[k];  // k ascending, no FMA contraction
      y[i * ldy + n] = acc;
    }
  }
}

}  // namespace specula::reference
