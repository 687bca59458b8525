#pragma once
// The draft-length policy of `--gamma auto`: before each round, pick the gamma in [0, max_gamma]
// that maximizes the expected tokens per second,
//     E[tokens | gamma] / (gamma * draft_step_ms + verify_ms(gamma + 1)),
// with E = (1 - a^(gamma+1)) / (1 - a) for a per-draft acceptance probability a (drafts accepted
// independently, as a prefix). a is estimated from the rounds so far (each round observes its
// matching prefix: `accepted` successes, plus one failure when it stopped short of gamma) with a
// weak prior of one success and one failure, every count discounted by 0.98 per drafting round so
// that the estimate follows acceptance that changes during a reply.
//
// Costs are exponential moving averages of measured times. A verify far above its width's average
// is clipped (one slow step must not price a width out for good), and a width never costs more
// than a wider one measured. An unmeasured verify width is read off the line through the two
// nearest measured widths (one plain round comes first, so width 1 is always measured). Only one
// width past the widest measured is a candidate: the cost curve bends upward (flat for a few rows,
// then compute-bound), so a line through narrow widths prices wide ones as free.
//
// Noise on a shared machine only slows steps, so a measurement below the estimate moves it
// further (0.6) than one above (0.3); and after 8 rounds in a row at one gamma >= 1, one round
// one wider re-measures that width, so one slow first measurement cannot price it out for good.
//
// gamma 0 is plain decoding; after a run of gamma-0 rounds the policy probes gamma 1 once, so that
// a changed acceptance can still be noticed (the run doubles, up to 16, after each probe that found
// nothing: a probe costs a few percent of one step, and a longer wait misses a drafter that agrees
// again).
#include <cstdint>
#include <vector>

namespace specula {

class AutoGamma {
 public:
  explicit AutoGamma(int64_t max_gamma, int64_t initial_gamma = 2);

  int64_t choose();
  // One finished round: its gamma, the matching-prefix length, and the measured times.
  void record(int64_t gamma, int64_t accepted, double draft_ms, double verify_ms);
  // A round whose gamma was chosen elsewhere: its acceptance evidence only.
  void record_acceptance(int64_t gamma, int64_t accepted);

  double acceptance() const;
  // The estimated tokens per millisecond of a round of `gamma` drafts (0 if costs are unknown).
  double expected_rate(int64_t gamma) const;

 private:
  double measured_cost(int64_t width) const;  // ms, a measured width's; < 0 if unmeasured
  double verify_cost(int64_t width) const;    // ms; < 0 if nothing is measured yet

  int64_t max_gamma_;
  int64_t initial_gamma_;
  double successes_ = 1.0;
  double failures_ = 1.0;
  double draft_ms_ = -1.0;         // per draft step
  std::vector<double> verify_ms_;  // by width (index = gamma + 1); < 0 = unmeasured
  int64_t zero_run_ = 0;
  int64_t probe_interval_ = 8;  // gamma-0 rounds before the next probe
  bool probing_ = false;        // the last choice was a probe
  int64_t last_best_ = -1;      // the previous round's best gamma ...
  int64_t same_run_ = 0;        // ... and how many rounds in a row it has been the best
};

}  // namespace specula
