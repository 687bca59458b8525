#pragma once
// What a batched target step costs by its row count, learned from the steps themselves.
//
// On a CPU the curve has a knee: a step of a few rows is bound by reading the weights (more rows
// cost almost nothing), past some width it is bound by multiplying (each row adds its multiply).
// Where the knee sits depends on the machine, the model and the precision, so no line fits it:
// the model keeps a cost per row count instead (util/cost_estimate.h, as `--gamma auto`'s
// verify costs, speculative/gamma_policy.h: noise on a shared machine only slows steps).
//
// An estimate is trusted only while it is fresh (measured within the last kFreshSteps steps), so a
// width the scheduler stopped using is re-measured once conditions may have changed. Other widths
// are priced optimistically, so that they get tried and so measured: the cheapest convex curve
// (flat, then rising ever faster) through the fresh widths. Between two fresh widths that is the
// neighbouring segments extended into the gap; below the narrowest fresh width, its segment
// extended down (or its cost, if it is the only one); one row past the widest fresh width, that
// width's cost plus the last slope seen (flat when only one width is fresh). Further out nothing is
// known.
#include <cstdint>
#include <vector>

namespace specula {

class StepCostModel {
 public:
  // Steps measured within this many steps count as fresh.
  static constexpr int64_t kFreshSteps = 64;

  void record(int64_t rows, double ms);
  // Estimated ms of a step of `rows` rows (>= 1); < 0 when nothing is known that far out.
  double ms(int64_t rows) const;

 private:
  struct Width {
    double ms = -1.0;          // estimate; < 0 = never measured
    int64_t measured_at = -1;  // step index of the last measurement
  };
  bool fresh(int64_t rows) const;
  double fresh_ms(int64_t rows) const;           // a fresh width's estimate, never above a wider fresh one's
  int64_t fresh_below(int64_t rows) const;       // the nearest fresh width below; -1 if none
  int64_t fresh_above(int64_t rows) const;       // the nearest fresh width above; -1 if none
  double slope(int64_t from, int64_t to) const;  // ms per row between two fresh widths (0 if from < 1)

  std::vector<Width> widths_;  // by row count
  int64_t steps_ = 0;
};

}  // namespace specula
