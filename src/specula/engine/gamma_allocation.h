#pragma once
// `--gamma auto` under load: the draft lengths of the greedy `auto` sequences that share one
// batched step, chosen together so that the step yields the most tokens per millisecond.
//
// A sequence drafting gamma tokens at acceptance a yields (1 - a^(gamma+1)) / (1 - a) tokens
// (speculative/gamma_policy.h); the step costs the target's estimate for its total rows
// (engine/step_cost.h) plus one batched drafter call per draft position (the drafter runs once for
// all sequences drafting that position). Starting from gamma 0 everywhere, one draft at a time
// goes to the sequence whose extra draft raises the step's rate most, while some draft raises it
// by more than a small margin (a tie with plain decoding is not worth the estimates' noise).
// So while steps are bound by reading the weights, extra rows are nearly free and every sequence
// drafts; once they are bound by multiplying, a draft must be likelier than not to be kept to pay
// for its row, and speculation shrinks or stops. A row count the cost model knows nothing about
// is never chosen.
#include <cstdint>
#include <vector>

#include "specula/engine/step_cost.h"

namespace specula {

struct GammaCandidate {
  double acceptance = 0.5;   // per-draft acceptance estimate, in [0, 1]
  int64_t max_gamma = 0;     // the most drafts it may get this round
  bool uses_drafter = true;  // false: drafts cost nothing to propose (prompt lookup)
};

struct StepLoad {
  int64_t other_rows = 0;         // rows of the step's other sequences
  double other_tokens = 0.0;      // tokens they are expected to yield
  int64_t other_draft_steps = 0;  // drafter calls they need anyway
  double draft_step_ms = 0.0;     // one batched drafter call
};

// The gamma of each candidate (same order).
std::vector<int64_t> allocate_gammas(const std::vector<GammaCandidate>& candidates, const StepLoad& load,
                                     const StepCostModel& cost);

// Expected tokens of one round of `gamma` drafts at per-draft acceptance a.
double expected_round_tokens(double acceptance, int64_t gamma);

}  // namespace specula
