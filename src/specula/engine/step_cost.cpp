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
  const double mx = sx_ / w_;
  const double var = sxx_ / w_ - mx * mx;
  if (var >= kMinVariance) {
    const double mean_per_row = mx > 0 ? (sy_ / w_) / mx : 0.0;
    slope_ = std::clamp((sxy_ / w_ - mx * (sy_ / w_)) / var, 0.0, mean_per_row);
  }
}

double StepCostModel::marginal_row_ms() const {
  if (w_ <= 0 || sx_ <= 0) return 0.0;
  // Steps of (almost) one size show no slope: keep the last one read from steps that differed,
  // else assume every row costs its share, so that rows must prove themselves cheap first.
  const double mean_per_row = sy_ / sx_;
  return slope_ >= 0 ? std::min(slope_, mean_per_row) : mean_per_row;
}

bool StepCostModel::compute_bound() const {
  if (w_ <= 0 || sx_ <= 0) return false;
  const double mean_per_row = sy_ / sx_;
  return marginal_row_ms() >= 0.5 * mean_per_row;
}

double StepCostModel::share(double step_ms, int64_t rows, int64_t sequences, int64_t own_rows) const {
  if (sequences <= 1) return step_ms;
  const double slope = std::min(marginal_row_ms(), step_ms / static_cast<double>(std::max<int64_t>(rows, 1)));
  const double fixed = step_ms - slope * static_cast<double>(rows);
  return fixed / static_cast<double>(sequences) + slope * static_cast<double>(own_rows);
}

}  // namespace specula
