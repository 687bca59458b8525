#include "specula/engine/step_cost.h"

#include <algorithm>

namespace specula {

void StepCostModel::record(int64_t rows, double ms) {
  const double x = static_cast<double>(rows);
  w_ = w_ * kDecay + 1.0;
  sx_ = sx_ * kDecay + x;
  sy_ = sy_ * kDecay + ms;
  sxx_ = sxx_ * kDecay + x * x;
  sxy_ = sxy_ * kDecay + x * ms;
}

double StepCostModel::marginal_row_ms() const {
  if (w_ <= 0) return 0.0;
  const double mx = sx_ / w_;
  const double var = sxx_ / w_ - mx * mx;
  if (var < 0.25) return 0.0;  // the steps have (almost) all been one size: no slope to read
  const double slope = (sxy_ / w_ - mx * (sy_ / w_)) / var;
  const double mean_per_row = mx > 0 ? (sy_ / w_) / mx : 0.0;
  return std::clamp(slope, 0.0, mean_per_row);
}

double StepCostModel::share(double step_ms, int64_t rows, int64_t sequences, int64_t own_rows) const {
  if (sequences <= 1) return step_ms;
  const double slope = std::min(marginal_row_ms(), step_ms / static_cast<double>(std::max<int64_t>(rows, 1)));
  const double fixed = step_ms - slope * static_cast<double>(rows);
  return fixed / static_cast<double>(sequences) + slope * static_cast<double>(own_rows);
}

}  // namespace specula
