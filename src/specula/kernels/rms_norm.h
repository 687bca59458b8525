#pragma once
// RMSNorm (docs/gemma4.md §5.1, in f32): y = x * rsqrt(mean(x^2) + eps) * w. Gemma 4 stores the
// actual multiplier (no `1 + w`). A null weight gives the scale-free norm (v_norm, router pre-norm).
// Each row's sum of squares is 16 partial sums in f32 (element j into sum j % 16) folded in a fixed
// order, so a row's bytes never depend on the other rows of the call (batch invariance).
#include <cstdint>

namespace specula {

// Normalizes `rows` rows of `dim` floats. Row r is read from x + r*ld_x and written to
// y + r*ld_y; x == y (in place) is allowed. `weight` has `dim` entries or is null.
void rms_norm(const float* x, int64_t rows, int64_t dim, int64_t ld_x, const float* weight, float eps, float* y,
              int64_t ld_y);

// Contiguous rows, in place.
inline void rms_norm_inplace(float* x, int64_t rows, int64_t dim, const float* weight, float eps) {
  rms_norm(x, rows, dim, dim, weight, eps, x, dim);
}

}  // namespace specula
