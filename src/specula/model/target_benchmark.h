#pragma once
// Timing primitives of the target model for `specula bench` (bench/bench_suite.h runs them):
//  * one plain greedy generation after a prompt: prefill tok/s, time to first token, decode tok/s;
//  * at a fixed context: one plain decode step and verify forwards of 2..max_width rows (what the
//    speculative loop runs), each rolled back so the context stays put.
#include <cstdint>
#include <span>
#include <vector>

#include "specula/model/target_model.h"

namespace specula {

// A deterministic pseudo-random prompt of `length` ids: BOS (2) first, then ids in [3, vocab).
// Throws if length < 1 or the vocabulary has fewer than 4 ids.
std::vector<int32_t> bench_prompt(int64_t vocab_size, int64_t length, uint32_t seed);

struct GenerationTiming {
  int64_t prompt_tokens = 0;
  int64_t decode_tokens = 0;  // decode forwards timed (tokens after the first)
  double prefill_ms = 0.0;
  double prefill_tok_per_s = 0.0;
  double ttft_ms = 0.0;  // call start to the first token (prefill + its sampling)
  double decode_ms_per_token = 0.0;
  double decode_tok_per_s = 0.0;
  // Process CPU time (all threads) per decode token: on a shared machine wall time includes time
  // other processes held the CPUs; with 1 thread this estimates the unloaded wall time.
  double decode_cpu_ms_per_token = 0.0;
  std::vector<int32_t> tokens;  // decode_tokens + 1 greedy tokens
};

// Plain greedy generation of decode_tokens + 1 tokens after `prompt` on a fresh state of `cache`
// (EOS ignored). The cache is left after the generation.
GenerationTiming time_generation(const TargetModel& model, TargetCache& cache, std::span<const int32_t> prompt,
                                 int64_t decode_tokens, ThreadPool& pool);

struct StepCosts {
  double decode_ms = 0.0;         // one plain decode step (1 row, last-row logits)
  std::vector<double> verify_ms;  // index w: one verify forward of w rows (w >= 2; [0], [1] unused)
  double verify_ratio(int64_t width) const {
    return decode_ms > 0 ? verify_ms.at(static_cast<size_t>(width)) / decode_ms : 0.0;
  }
};

// Times, at a cache's current context (>= 1 position; unchanged by each call), one decode step of
// `token` and verify forwards of w = 2..max_width rows (logits and final-norm hidden of every row,
// as the speculative loop requests them), each rolled back. Construction runs one untimed forward
// of max_width rows, so no timed call pays for growing the workspaces; it throws if max_width
// exceeds the cache's rollback reserve. Several timers (one per context) can be sampled in turn,
// so a machine whose speed drifts moves every context alike.
class TargetStepTimer {
 public:
  TargetStepTimer(const TargetModel& model, TargetCache& cache, int32_t token, int64_t max_width, ThreadPool& pool);
  // One call of every width, in turn (1, 2, .., max_width).
  void sample();
  // The median of each width's calls so far (at least one sample()).
  StepCosts costs() const;
  // Every decode step's time so far (ms), one per sample() in the order taken.
  const std::vector<double>& decode_samples() const { return samples_[1]; }

 private:
  const TargetModel& model_;
  TargetCache& cache_;
  ThreadPool& pool_;
  std::vector<int32_t> rows_;  // max_width copies of the token
  // samples_[w]: the times of the forwards of w rows (w = 1: the decode step).
  std::vector<std::vector<double>> samples_;
};

// `repeats` samples of one TargetStepTimer: the calls go round the widths in turn (1, 2, ..,
// max_width, 1, 2, ..), so a machine whose speed drifts during the measurement moves every width
// alike and the ratios to the decode step stay fair.
StepCosts time_target_steps(const TargetModel& model, TargetCache& cache, int32_t token, int64_t max_width,
                            int64_t repeats, ThreadPool& pool);

}  // namespace specula
