#include "specula/engine/gamma_allocation.h"

#include <algorithm>
#include <cmath>

namespace specula {

double expected_round_tokens(double acceptance, int64_t gamma) {
  const double a = std::clamp(acceptance, 0.0, 1.0 - 1e-9);
  return (1.0 - std::pow(a, static_cast<double>(gamma + 1))) / (1.0 - a);
}

namespace {

// A move must raise the step's rate by this fraction. Acceptance estimates are noisy, and the
// costs of different widths are measured at different times on a machine whose speed drifts by
// several percent from minute to minute: a draft that only nearly ties with plain decoding is not
// worth the risk of losing to it.
constexpr double kMinGain = 0.05;

// Tokens per ms of a step in which candidate i drafts gammas[i]; < 0 if its cost is unknown.
double step_rate(const std::vector<GammaCandidate>& candidates, const std::vector<int64_t>& gammas,
                 const StepLoad& load, const StepCostModel& cost) {
  int64_t rows = load.other_rows;
  int64_t draft_steps = load.other_draft_steps;
  double tokens = load.other_tokens;
  for (size_t i = 0; i < candidates.size(); ++i) {
    rows += gammas[i] + 1;
    tokens += expected_round_tokens(candidates[i].acceptance, gammas[i]);
    if (candidates[i].uses_drafter) draft_steps = std::max(draft_steps, gammas[i]);
  }
  const double target_ms = cost.ms(rows);
  if (target_ms < 0) return -1.0;
  const double ms = target_ms + static_cast<double>(draft_steps) * std::max(load.draft_step_ms, 0.0);
  return ms > 0 ? tokens / ms : 0.0;
}

}  // namespace

std::vector<int64_t> allocate_gammas(const std::vector<GammaCandidate>& candidates, const StepLoad& load,
                                     const StepCostModel& cost) {
  std::vector<int64_t> gammas(candidates.size(), 0);
  double rate = step_rate(candidates, gammas, load, cost);
  if (rate < 0) return gammas;  // not even plain rows are priced yet: decode plainly and measure
  // Moves: one more draft for one sequence, or one more for every sequence that can take one (a
  // new draft position's drafter call, shared by all of them, may pay only when all draft it).
  const size_t everyone = candidates.size();
  auto raise = [&](size_t which) {
    for (size_t i = 0; i < candidates.size(); ++i)
      if ((which == everyone || which == i) && gammas[i] < candidates[i].max_gamma) ++gammas[i];
  };
  for (;;) {
    size_t best = everyone + 1;
    double best_rate = rate * (1.0 + kMinGain);
    for (size_t which = 0; which <= everyone; ++which) {
      const std::vector<int64_t> before = gammas;
      raise(which);
      const double r = gammas != before ? step_rate(candidates, gammas, load, cost) : -1.0;
      gammas = before;
      if (r > best_rate) {
        best_rate = r;
        best = which;
      }
    }
    if (best > everyone) return gammas;
    raise(best);
    rate = best_rate;
  }
}

}  // namespace specula
