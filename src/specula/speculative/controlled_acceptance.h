#pragma once
// Controlled acceptance for benchmarks: random-weight models make real
// acceptance rates meaningless, so a benchmark runs the real drafter (paying its real cost) and
// then, through SpeculativeOptions::override_drafts, replaces each draft by the target's known
// greedy continuation (recorded from a plain run) with probability p, and by a token the target
// will reject otherwise. Acceptance then follows p exactly (per draft, as a prefix), and the
// engine's efficiency shows against ideal_speedup(). Which reference positions get a right draft
// is drawn once per seed, so runs of different gammas at one seed meet the same positions.
#include <cstdint>
#include <memory>
#include <vector>

#include "specula/sample/rng.h"
#include "specula/speculative/speculative.h"

namespace specula {

// `reference`: the plain greedy tokens after the prompt (at least as many as the run emits plus
// the largest gamma; beyond it, drafts are wrong). Deterministic in `seed`.
DraftOverride controlled_acceptance(std::vector<int32_t> reference, double p, int64_t vocab_size, uint64_t seed);

// Expected tokens per round with free drafting and free verification: (1 - p^(g+1)) / (1 - p),
// i.e. the speedup over plain decoding an ideal engine would reach at per-draft acceptance p.
double ideal_speedup(double p, int64_t gamma);

// The speedup over plain decoding expected from the measured costs: ideal_speedup(p, gamma)
// tokens per round over a round's cost, gamma * draft_step_ratio + verify_ratio, both relative to
// one plain decode step (verify_ratio: a verify forward of gamma + 1 rows). gamma 0 is plain: 1.
double expected_speedup(double p, int64_t gamma, double draft_step_ratio, double verify_ratio);

}  // namespace specula
