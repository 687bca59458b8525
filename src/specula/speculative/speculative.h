#pragma once
// Speculative decoding on the target model (docs/gemma4.md §8, docs/architecture.md §3).
//
// Prefill (chunked) -> first token from the prefill row -> rounds: propose gamma drafts (the
// assistant drafter, or prompt lookup), verify [pending] + drafts in ONE target forward of gamma+1
// rows (logits and final-norm hidden for every row), accept, emit the accepted drafts plus the
// target's own token, roll the rejected drafts' KV back.
//  * temperature 0: accept the longest prefix of drafts equal to the target's choice. The target's
//    kernels are batch invariant, so the output equals generate_greedy's bit for bit, for every
//    gamma and every context length.
//  * temperature > 0: lossless speculative sampling — p = the exact distribution plain sampling
//    draws from (sample/logits_pipeline.h, with the history of that row), accept with min(1, p/q),
//    resample from the residual on rejection, the bonus token from p of the last row. q is the
//    drafter's softmax over its candidate scores at the same temperature (point masses for
//    deterministic proposals: prompt lookup, forced drafts).
// EOS inside the accepted run, the token budget and the context limit stop exactly where plain
// decoding stops. Statistics (docs/gemma4.md §8): every round drafts its gamma (drafted += gamma even
// when the budget ends inside the round), accepted += the full matching prefix, target_calls =
// 1 + rounds.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "specula/grammar/token_constraint.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/sample/sampling_params.h"
#include "specula/speculative/gamma_choice.h"
#include "specula/speculative/prompt_lookup.h"

namespace specula {

enum class DraftMethod { Drafter, Lookup };

// Test hook: sees each round's proposal and may replace it (any length <= the round's gamma).
// With sampling, the drafts it returns are treated as deterministic proposals (point-mass q).
struct DraftRoundInfo {
  std::span<const int32_t> context;  // prompt + every emitted token (the pending token last)
  size_t prompt_length = 0;
  int64_t round = 0;  // 0-based
  int64_t gamma = 0;
};
using DraftOverride = std::function<void(const DraftRoundInfo& info, std::vector<int32_t>& drafts)>;

struct SpeculativeOptions {
  int64_t max_tokens = 128;
  bool ignore_eos = false;
  DraftMethod method = DraftMethod::Drafter;
  GammaChoice gamma;
  SamplingParams sampling = greedy_sampling();
  PromptLookupOptions lookup;
  bool trace = false;             // record every round in SpeculativeResult::rounds
  DraftOverride override_drafts;  // tests only
  // The cache already holds prompt[0, cache.offset()) with offset < prompt.size() (a prompt cache):
  // it is not reset and only prompt[offset, size) is prefilled. Output is the same as a cold run.
  bool continue_cache = false;
  // Called with each emitted token and the logits row (vocab_size floats: the model's softcapped
  // logits, before the sampling pipeline) it was chosen from: the prefill row for the first token,
  // verify row i for accepted draft i, row a for the target's own token. False stops generation
  // after this token (stop_reason "callback"), like on_token.
  std::function<bool(int32_t token, std::span<const float> logits)> on_emit;
  // Constrained decoding: every token chosen keeps the output a prefix of the grammar's language
  // (the mask is applied in the logits pipeline, to the first token, each verify row with the
  // grammar state of its own prefix, and the drafts); EOS only where the grammar may end. Once the
  // grammar is complete with nothing allowed to follow, generation stops (stop_reason "eos").
  grammar::TokenConstraint constraint;
  // Called after each decode step (the prefill's first token, then every verify round) whose
  // tokens were all emitted without stopping. False stops generation (stop_reason "callback").
  std::function<bool()> on_step;

  static SamplingParams greedy_sampling() {
    SamplingParams p;
    p.temperature = 0.0;
    return p;
  }
};

struct SpecRound {
  std::vector<int32_t> drafts;
  int64_t accepted = 0;
  double draft_ms = 0.0;   // wall time of the round's drafting (near 0 without drafts)
  double verify_ms = 0.0;  // wall time of its verify forward (drafts.size() + 1 rows)
};

struct SpeculativeStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t target_calls = 0;
  int64_t rounds = 0;
  std::map<int64_t, int64_t> gamma_histogram;  // gamma -> rounds
  double prefill_ms = 0.0;
  double decode_ms = 0.0;  // everything after the prefill
  double draft_ms = 0.0;   // drafting (drafter steps / lookup)
  double verify_ms = 0.0;  // verify forwards

  double acceptance_rate() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0; }
  // Mean matching-prefix length per round.
  double mean_accepted_length() const { return rounds > 0 ? static_cast<double>(accepted) / rounds : 0.0; }
  double decode_tok_per_s() const {
    return decode_ms > 0 && generated_tokens > 1 ? (generated_tokens - 1) * 1000.0 / decode_ms : 0.0;
  }
};

struct SpeculativeResult {
  std::vector<int32_t> tokens;
  // "eos", "max_tokens", "context", "callback" or "grammar" (a constraint left no token: only with
  // a vocabulary that cannot spell what the grammar requires)
  std::string stop_reason;
  SpeculativeStats stats;
  std::vector<SpecRound> rounds;  // with options.trace
  // What the cache holds after the prompt: cache.offset() == prompt.size() + cache_tail.size().
  // Every emitted token but the last (never fed), and past a stop inside an accepted run also the
  // accepted drafts beyond it (an accepted EOS among them).
  std::vector<int32_t> cache_tail;
};

// Generates on a fresh state of `cache` (reset first; see continue_cache). `drafter` is required for
// DraftMethod::Drafter and ignored for Lookup. The cache's rollback reserve must cover the gamma
// used (throws otherwise, before any work). on_token as in generate_greedy. It steps one
// SpeculativeSession (speculative_session.h) alone; the engine's scheduler steps many together.
SpeculativeResult generate_speculative(const TargetModel& model, TargetCache& cache, const Drafter* drafter,
                                       std::span<const int32_t> prompt, const SpeculativeOptions& options,
                                       ThreadPool& pool, const std::function<bool(int32_t)>& on_token = {});

}  // namespace specula
