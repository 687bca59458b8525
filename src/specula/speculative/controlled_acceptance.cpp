#include "specula/speculative/controlled_acceptance.h"

#include <cmath>

#include "specula/util/error.h"

namespace specula {

DraftOverride controlled_acceptance(std::vector<int32_t> reference, double p, int64_t vocab_size, uint64_t seed) {
  if (!(p >= 0.0 && p <= 1.0)) fail("controlled acceptance: p = {} must be in [0, 1]", p);
  if (vocab_size < 2) fail("controlled acceptance: vocabulary size {} must be >= 2", vocab_size);
  // Whether a draft is right depends on its position in the reference alone, drawn once: every
  // gamma (and --gamma auto) then meets the same right and wrong positions, so runs compared at one
  // p differ in their gammas, not in their luck (over 128 tokens the luck of independent draws
  // moved the rounds needed by ~15 %). Each position is judged at most once in a run (a round
  // ends at its first wrong draft, whose position the target's own token fills), so drafts are
  // still accepted independently with probability p.
  Rng rng(seed, 7);
  auto right = std::make_shared<std::vector<bool>>(reference.size());
  for (size_t at = 0; at < right->size(); ++at) (*right)[at] = rng.uniform() < p;
  auto ref = std::make_shared<const std::vector<int32_t>>(std::move(reference));
  return [right, ref, vocab_size](const DraftRoundInfo& info, std::vector<int32_t>& drafts) {
    const size_t emitted = info.context.size() - info.prompt_length;
    drafts.resize(static_cast<size_t>(info.gamma));
    for (size_t i = 0; i < drafts.size(); ++i) {
      const size_t at = emitted + i;
      const bool have = at < ref->size();
      const int32_t truth = have ? (*ref)[at] : 0;
      drafts[i] = have && (*right)[at] ? truth : static_cast<int32_t>((truth + 1) % vocab_size);
    }
  };
}

double ideal_speedup(double p, int64_t gamma) {
  if (p >= 1.0) return static_cast<double>(gamma + 1);
  return (1.0 - std::pow(p, static_cast<double>(gamma + 1))) / (1.0 - p);
}

double expected_speedup(double p, int64_t gamma, double draft_step_ratio, double verify_ratio) {
  if (gamma < 0) fail("expected speedup: gamma {} must be >= 0", gamma);
  if (gamma == 0) return 1.0;
  if (!(draft_step_ratio >= 0.0) || !(verify_ratio > 0.0))
    fail("expected speedup: draft step ratio {} must be >= 0 and verify ratio {} > 0", draft_step_ratio, verify_ratio);
  return ideal_speedup(p, gamma) / (static_cast<double>(gamma) * draft_step_ratio + verify_ratio);
}

}  // namespace specula
