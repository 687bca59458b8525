#pragma once
// The speculative-decoding timing primitives of `specula bench`; the
// suite (bench/bench_suite.h) schedules them, the CLI formats them:
//  * the cost of one drafter step (the verify costs are model/target_benchmark.h's);
//  * controlled acceptance: end-to-end decode tok/s of speculative decoding where the real
//    drafter runs (its cost is paid) but each draft is replaced by the target's known greedy
//    continuation with probability p (speculative/controlled_acceptance.h); the output is checked
//    against plain greedy decoding.
// Random weights make real acceptance rates meaningless; these numbers measure the engine.
#include <cstdint>
#include <span>
#include <vector>

#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"

namespace specula {

// One drafter step (k = 0) extending `token` with the target's final-norm hidden `g`, at the
// cache's context: the mean wall time of `repeats` calls after one untimed call (which faults the
// drafter's mapped weights in), ms. Each timed call follows an untimed target decode step of
// `token` (rolled back, so the context is unchanged on return): as in the speculative loop, the
// target's weight stream has pushed the drafter's weights and the KV rows out of the caches.
double time_draft_step(const TargetModel& model, TargetCache& cache, const Drafter& drafter, int32_t token,
                       const float* g, int64_t repeats, ThreadPool& pool);

// One speculative generation of `tokens` tokens after `prompt` (fresh cache state, EOS ignored)
// with drafts forced to per-draft acceptance p. `reference`: the plain greedy continuation of
// `prompt`, at least tokens + the largest gamma long. Throws specula::Error if the output differs
// from reference[0, tokens) — speculative decoding must stay exact — or if the cache's rollback
// reserve is below the gamma.
SpeculativeResult run_controlled_acceptance(const TargetModel& model, TargetCache& cache, const Drafter& drafter,
                                            std::span<const int32_t> prompt, const std::vector<int32_t>& reference,
                                            double p, const GammaChoice& gamma, int64_t tokens, uint32_t seed,
                                            ThreadPool& pool);

}  // namespace specula
