#pragma once
// One sequence's speculative generation as explicit steps, so that a scheduler can run many
// sessions in one batched target forward (model/target_model.h forward_batch):
//
//   prefill:  next_step() hands out the next chunk of the prompt; the last chunk's output row
//             gives the first token;
//   rounds:   next_step() proposes gamma drafts (the assistant drafter over this sequence's own
//             caches, or prompt lookup) and hands out [pending] + drafts as the verify rows;
//             complete_step() accepts the longest agreeing prefix (greedy) or runs lossless
//             speculative sampling, rolls the rejected drafts' KV back and emits the tokens.
//
// Plain decoding is gamma 0 (one row per round). The rules are generate_speculative's
// (speculative/speculative.h): it is this session run alone. A row's bytes do not depend on the other
// rows of its step, so a session's tokens are the same whatever else shares its steps; with
// `--gamma auto`, greedy rounds are sized from measured step times (greedy output does not
// depend on gamma) and sampled rounds from acceptance alone (a seed reproduces its text).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "specula/grammar/grammar_matcher.h"
#include "specula/grammar/token_mask.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/sample/logits_pipeline.h"
#include "specula/sample/rng.h"
#include "specula/sample/token_distribution.h"
#include "specula/speculative/gamma_policy.h"
#include "specula/speculative/speculative.h"

namespace specula {

class SpeculativeSession {
 public:
  // Validates the options and resets the cache (unless options.continue_cache); throws
  // specula::Error before any work. `model`, `cache`, `drafter` and `prompt`'s copy are used for
  // the session's life.
  SpeculativeSession(const TargetModel& model, TargetCache& cache, const Drafter* drafter,
                     std::span<const int32_t> prompt, SpeculativeOptions options,
                     std::function<bool(int32_t)> on_token = {});

  bool finished() const { return phase_ == Phase::Done; }
  bool prefilling() const { return phase_ == Phase::Prefill; }
  // Prompt tokens still to be fed.
  int64_t prefill_remaining() const { return static_cast<int64_t>(prompt_.size()) - fed_; }
  TargetCache& cache() const { return cache_; }

  // The rows of the next step: at most max_prefill_rows prompt tokens while prefilling (and never
  // more than the cache's max_chunk), else the verify rows of a new round (drafting first, alone).
  // The returned span stays valid until complete_step().
  SequenceRows next_step(int64_t max_prefill_rows, ThreadPool& pool);

  // A round drafted one drafter step at a time, so that a scheduler can run the draft steps of
  // many sessions as one batched drafter call (model/drafter.h step_batch) — what next_step()
  // does alone once prefill is over:
  //   begin_round()   chooses gamma (prompt lookup proposes all drafts here);
  //   draft_row()     the drafter step this round needs next, if any: give add_draft() its result
  //                   and this session's share of that call's time, until draft_row() is empty;
  //   verify_rows()   [pending token] + drafts, the rows of the verify step.
  void begin_round();
  std::optional<DraftRow> draft_row() const;
  void add_draft(DraftStep step, double draft_ms);
  SequenceRows verify_rows();
  // The output of the step next_step() described, and its wall time (for `--gamma auto`).
  void complete_step(const ForwardOutput& out, double step_ms);
  // Ends the session now (e.g. the request was cancelled between steps): stop_reason "callback".
  void stop();
  // Whether a scheduler sizes this session's rounds while other sequences share its steps
  // (greedy `--gamma auto`; engine/gamma_allocation.h). Sampled rounds never follow timings.
  bool gamma_follows_load() const { return options_.gamma.automatic && greedy_; }
  // The gamma of the next round (begin_round), or -1 for the session's own choice; only
  // gamma_follows_load() sessions take it.
  void set_scheduled_gamma(int64_t gamma) { scheduled_gamma_ = gamma; }
  // The most drafts the next round may ask for (gamma bound and context).
  int64_t gamma_room() const;
  // Drafts the current round asks for (after begin_round).
  int64_t round_gamma() const { return round_gamma_; }
  // The estimated probability that a draft is accepted, given the previous one was.
  double acceptance() const { return policy_.acceptance(); }
  bool uses_drafter() const { return use_drafter_; }

  const SpeculativeResult& result() const { return res_; }
  SpeculativeResult take_result() { return std::move(res_); }

 private:
  enum class Phase { Prefill, Decode, Done };
  // The override's drafts (benchmarks) and the q of deterministic proposals, once drafting ends.
  void finish_proposals();
  bool emit(int32_t token, const float* logits);
  bool step_done();
  void finish_prefill(const ForwardOutput& out);
  void finish_round(const ForwardOutput& out, double verify_ms);
  // After a step whose tokens were all emitted: whether another round fits in the context.
  void continue_or_finish(bool going);
  void finish();
  bool is_eos(int32_t t) const;
  // Constrained decoding (options.constraint): the mask after `state` ({} when unconstrained),
  // masking one drafter step's candidates, and advancing the emitted state.
  AllowedTokens constraint_mask(const grammar::GrammarMatcher* state);
  bool constrain_draft_step(DraftStep& step, const grammar::GrammarMatcher& state);
  void truncate_drafts_to_constraint();
  bool advance_constraint(int32_t token);

  const TargetModel& model_;
  TargetCache& cache_;
  const Drafter* drafter_;
  SpeculativeOptions options_;
  std::function<bool(int32_t)> on_token_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> eos_;
  bool use_drafter_ = false;
  bool greedy_ = true;
  int64_t vocab_ = 0;
  int64_t max_gamma_ = 0;

  Phase phase_ = Phase::Prefill;
  int64_t fed_ = 0;         // prompt tokens in the cache
  int64_t chunk_rows_ = 0;  // rows of the step handed out by next_step()
  SpeculativeResult res_;
  std::vector<int32_t> context_;  // prompt + emitted
  std::vector<float> g_;          // the drafter's hidden input for the next round
  Rng verify_rng_;
  Rng draft_rng_;
  AutoGamma policy_;
  int64_t round_gamma_ = 0;                             // drafts the current round asks for
  bool drafting_ = false;                               // between begin_round() and verify_rows()
  int32_t draft_token_ = 0;                             // the token the next drafter step extends
  std::vector<float> draft_hidden_;                     // and its backbone hidden input
  std::optional<grammar::GrammarMatcher> draft_state_;  // constrained: the grammar after the drafts so far
  bool draft_blocked_ = false;                          // constrained: the grammar ends this round's drafting
  std::vector<int32_t> drafts_;
  std::vector<TokenDistribution> qs_;
  std::vector<int32_t> history_;
  std::vector<int32_t> step_tokens_;
  double draft_ms_ = 0.0;         // the current round's drafting time
  int64_t scheduled_gamma_ = -1;  // set_scheduled_gamma()
  bool round_scheduled_ = false;  // the current round's gamma came from the scheduler
  std::chrono::steady_clock::time_point decode_start_;
  std::unique_ptr<grammar::TokenMasker> masker_;          // null when unconstrained
  std::optional<grammar::GrammarMatcher> grammar_state_;  // after every emitted token
};

}  // namespace specula
