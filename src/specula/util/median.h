#pragma once
// The median of a list of measurements (benchmarks report medians over runs and calls).
#include <vector>

namespace specula {

// The median of a non-empty list (the mean of the middle two for an even count); throws
// specula::Error for an empty one.
double median(std::vector<double> values);

}  // namespace specula
