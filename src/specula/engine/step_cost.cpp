#include "specula/engine/step_cost.h"

#include <algorithm>

#include "specula/util/cost_estimate.h"

namespace specula {

namespace {
constexpr double kStepOutlierClip = 1.5;  // a step counts as at most this times its width's estimate
constexpr int64_t kMaxRows = 4096;        // wider steps (whole prompt chunks) are not recorded
}  // namespace

void StepCostModel::record(int64_t rows, double ms) {
  ++steps_;
  if (rows < 1 || rows > kMaxRows || !(ms >= 0)) return;
  if (static_cast<int64_t>(widths_.size()) <= rows) widths_.resize(static_cast<size_t>(rows) + 1);
  Width& w = widths_[static_cast<size_t>(rows)];
  w.ms = update_cost_estimate(w.ms, w.ms < 0 ? ms : std::min(ms, kStepOutlierClip * w.ms));
  w.measured_at = steps_;
}

bool StepCostModel::fresh(int64_t rows) const {
  if (rows < 1 || rows >= static_cast<int64_t>(widths_.size())) return false;
  const Width& w = widths_[static_cast<size_t>(rows)];
  return w.ms >= 0 && steps_ - w.measured_at < kFreshSteps;
}

double StepCostModel::fresh_ms(int64_t rows) const {
  double v = widths_[static_cast<size_t>(rows)].ms;
  for (int64_t r = rows + 1; r < static_cast<int64_t>(widths_.size()); ++r)
    if (fresh(r)) v = std::min(v, widths_[static_cast<size_t>(r)].ms);
  return v;
}

double StepCostModel::slope(int64_t from, int64_t to) const {
  if (from < 1 || to < 1) return 0.0;
  return std::max(0.0, (fresh_ms(to) - fresh_ms(from)) / static_cast<double>(to - from));
}

int64_t StepCostModel::fresh_below(int64_t rows) const {
  for (int64_t r = std::min(rows, static_cast<int64_t>(widths_.size())) - 1; r >= 1; --r)
    if (fresh(r)) return r;
  return -1;
}

int64_t StepCostModel::fresh_above(int64_t rows) const {
  for (int64_t r = rows + 1; r < static_cast<int64_t>(widths_.size()); ++r)
    if (fresh(r)) return r;
  return -1;
}

double StepCostModel::ms(int64_t rows) const {
  if (rows < 1) return -1.0;
  if (fresh(rows)) return fresh_ms(rows);
  const int64_t lo = fresh_below(rows), hi = fresh_above(rows);
  if (lo < 0 && hi < 0) return -1.0;
  if (hi < 0) {  // one row past the widest fresh width at most
    if (rows > lo + 1) return -1.0;
    return fresh_ms(lo) + slope(fresh_below(lo), lo);
  }
  // The cheapest convex curve through the fresh widths: the segments next to the gap, extended
  // into it (a line between lo and hi would price the near side of a knee as dear as its far side).
  // Below the narrowest fresh width, with nothing to extend, fewer rows cost the same.
  double estimate = lo > 0 ? fresh_ms(lo) + slope(fresh_below(lo), lo) * static_cast<double>(rows - lo) : 0.0;
  if (const int64_t next = fresh_above(hi); next > 0)
    estimate = std::max(estimate, fresh_ms(hi) - slope(hi, next) * static_cast<double>(hi - rows));
  else if (lo < 0)
    estimate = fresh_ms(hi);
  return std::clamp(estimate, lo > 0 ? fresh_ms(lo) : 1e-6, fresh_ms(hi));
}

}  // namespace specula
