#pragma once
// A running estimate of a measured time on a shared machine. Timing noise there is one-sided
// (another process slows a step, nothing speeds it up), so a measurement below the estimate moves
// it further than one above. The first measurement (estimate < 0) is taken as it is.

namespace specula {

inline double update_cost_estimate(double estimate, double measured) {
  constexpr double kUp = 0.3;    // weight of a measurement above the estimate ...
  constexpr double kDown = 0.6;  // ... and of one below it
  if (estimate < 0) return measured;
  return estimate + (measured < estimate ? kDown : kUp) * (measured - estimate);
}

}  // namespace specula
