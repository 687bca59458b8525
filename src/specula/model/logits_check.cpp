#include "specula/model/logits_check.h"

#include <cmath>

#include "specula/util/error.h"

namespace specula {

void require_finite_logits(const float* row, int64_t vocab, int64_t position, const std::string& model_dir) {
  int64_t nan = 0, inf = 0, first = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isfinite(row[i])) continue;
    if (std::isnan(row[i]))
      ++nan;
    else
      ++inf;
    if (first < 0) first = i;
  }
  if (first < 0) return;
  fail(
      "non-finite logits at position {}: {} NaN and {} infinite of {} values (first: token {} = {}); the "
      "checkpoint's weights may be corrupt (check them with `specula inspect --check {}`)",
      position, nan, inf, vocab, first, row[first], model_dir);
}

}  // namespace specula
