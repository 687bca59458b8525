#include "specula/util/median.h"

#include <algorithm>

#include "specula/util/error.h"

namespace specula {

double median(std::vector<double> values) {
  if (values.empty()) fail("median of an empty list");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace specula
