#pragma once
// What one more row costs in a batched step, learned from the steps themselves: a least-squares
// line through (rows, ms) of recent steps, older steps weighing less (0.95 per step). On a CPU a
// step of a few rows is bound by reading the weights (the line is flat: more rows cost almost
// nothing) and a step of many rows by multiplying (the line rises): the slope tells which.
//
// The scheduler turns it into each sequence's share of a step for `--gamma auto`:
//     share_i = (step_ms - slope * rows) / sequences + slope * rows_i,
// the step's fixed part split evenly plus what the sequence's own rows add (the shares add up to
// the step). Alone, share is the
// step's time (so a lone stream behaves as without batching); under load the widths that add
// little (memory-bound steps) stay cheap, and once steps are compute-bound every draft row costs
// its multiply, so speculation shrinks or switches off.
#include <cstdint>

namespace specula {

class StepCostModel {
 public:
  void record(int64_t rows, double ms);
  // ms per extra row, in [0, the mean ms per row]; 0 until the steps have differed in size.
  double marginal_row_ms() const;
  // A sequence's share of a step of `step_ms` and `rows` rows over `sequences` sequences (>= 1),
  // of which it fed `own_rows`.
  double share(double step_ms, int64_t rows, int64_t sequences, int64_t own_rows) const;

 private:
  static constexpr double kDecay = 0.95;
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // decayed weight and sums of x, y, x^2, xy
};

}  // namespace specula
