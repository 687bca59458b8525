#pragma once
// The speculative-decoding measurements of `specula bench --draft` (issue 4), as library calls so
// the CLI only formats them:
//  * costs: one drafter step and one verify forward of w = 2..max_width rows, each next to one
//    plain decode step (1 row), all at the same context (a random prompt), medians of repeats;
//  * controlled acceptance: end-to-end decode tok/s of plain vs speculative decoding where the
//    real drafter runs (its cost is paid) but each draft is replaced by the target's known greedy
//    continuation with probability p (spec/controlled_acceptance.h), next to the ideal speedup.
// Random weights make real acceptance rates meaningless; these numbers measure the engine.
#include <cstdint>
#include <string>
#include <vector>

#include "specula/model/target_model.h"
#include "specula/spec/drafter.h"
#include "specula/spec/speculative.h"

namespace specula {

struct DraftBenchOptions {
  int64_t prompt_tokens = 256;
  int64_t repeats = 8;            // timed repetitions per measurement (median reported)
  int64_t max_width = 8;          // verify widths 2..max_width (needs rollback_reserve >= max_width)
  int64_t generate_tokens = 64;   // controlled-acceptance runs
  std::vector<double> acceptance = {0.3, 0.5, 0.7, 0.9};
  std::vector<std::string> gammas = {"1", "2", "3", "4", "auto"};
  uint32_t seed = 1;
};

struct DraftCosts {
  double decode_ms = 0.0;                 // one plain decode step (median)
  double draft_step_ms = 0.0;             // one drafter step (median)
  std::vector<double> verify_ms;          // index w: a verify forward of w rows (w >= 2; [0], [1] unused)
  double draft_step_relative() const { return decode_ms > 0 ? draft_step_ms / decode_ms : 0.0; }
  double verify_relative(int64_t width) const {
    return decode_ms > 0 ? verify_ms.at(static_cast<size_t>(width)) / decode_ms : 0.0;
  }
};

DraftCosts bench_draft_costs(const TargetModel& model, const Drafter& drafter, const DraftBenchOptions& options,
                             ThreadPool& pool);

struct ControlledAcceptanceRun {
  double p = 0.0;
  std::string gamma;              // "N" or "auto"
  double plain_tok_per_s = 0.0;
  double spec_tok_per_s = 0.0;
  double speedup = 0.0;           // spec / plain
  double ideal_speedup = 0.0;     // free drafting and verification (auto: at the largest gamma)
  int64_t drafted = 0;
  int64_t accepted = 0;
};

std::vector<ControlledAcceptanceRun> bench_controlled_acceptance(const TargetModel& model, const Drafter& drafter,
                                                                 const DraftBenchOptions& options, ThreadPool& pool);

}  // namespace specula
