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
// its multiply, so speculation shrinks. The scheduler also stops greedy `auto` drafting outright
// while several sequences share compute-bound steps (compute_bound()): there a rejected draft row
// costs as much as a decoded one, so drafting cannot pay.
#include <cstdint>

namespace specula {

class StepCostModel {
 public:
  void record(int64_t rows, double ms);
  // ms per extra row, in [0, the mean ms per row]: the slope last read while the steps differed in
  // size (kept while they are all one size), the mean itself before that (0 before any step).
  double marginal_row_ms() const;
  // A sequence's share of a step of `step_ms` and `rows` rows over `sequences` sequences (>= 1),
  // of which it fed `own_rows`.
  double share(double step_ms, int64_t rows, int64_t sequences, int64_t own_rows) const;
  // Whether an extra row costs at least half what a row costs on average: the steps are bound by
  // multiplying, and a draft row the target rejects costs as much as a decoded one.
  bool compute_bound() const;

 private:
  static constexpr double kDecay = 0.95;
  static constexpr double kMinVariance = 0.1;           // of the row counts, to read a slope
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // decayed weight and sums of x, y, x^2, xy
  double slope_ = -1;                                   // the last slope read; < 0: none yet
};

}  // namespace specula
