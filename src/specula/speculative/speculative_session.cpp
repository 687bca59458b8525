#include "specula/speculative/speculative_session.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "specula/sample/logits_pipeline.h"
#include "specula/sample/sampler.h"
#include "specula/sample/speculative_sampling.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"

namespace specula {

namespace {

using Clock = std::chrono::steady_clock;

// Streams of the run's seed: the verifier (target draws) and the drafter never shift each other.
constexpr uint64_t kVerifyStream = 0;
constexpr uint64_t kDraftStream = 1;

// Costs relative to one decode step that `--gamma auto` assumes when sampling (see finish_round).
constexpr double kNominalDraftStepCost = 0.03;
constexpr double kNominalVerifyRowCost = 0.05;

int64_t checked_max_gamma(const SpeculativeOptions& options, int64_t reserve) {
  if (options.gamma.automatic) {
    if (options.gamma.max_gamma < 0) fail("speculative: max gamma {} must be >= 0", options.gamma.max_gamma);
    return std::min(options.gamma.max_gamma, reserve);
  }
  if (options.gamma.fixed < 0) fail("speculative: gamma {} must be >= 0", options.gamma.fixed);
  if (options.gamma.fixed > reserve)
    fail("speculative: gamma {} exceeds the target cache's rollback reserve {} (raise TargetOptions::rollback_reserve)",
         options.gamma.fixed, reserve);
  return options.gamma.fixed;
}

}  // namespace

SpeculativeSession::SpeculativeSession(const TargetModel& model, TargetCache& cache, const Drafter* drafter,
                                       std::span<const int32_t> prompt, SpeculativeOptions options,
                                       std::function<bool(int32_t)> on_token)
    : model_(model),
      cache_(cache),
      drafter_(drafter),
      options_(std::move(options)),
      on_token_(std::move(on_token)),
      prompt_(prompt.begin(), prompt.end()),
      eos_(model.eos_token_ids()),
      max_gamma_(checked_max_gamma(options_, cache.options().rollback_reserve)),
      verify_rng_(options_.sampling.seed, kVerifyStream),
      draft_rng_(options_.sampling.seed, kDraftStream),
      policy_(max_gamma_) {
  if (prompt_.empty()) fail("speculative: the prompt is empty (it must hold at least the BOS token)");
  if (options_.max_tokens < 0) fail("speculative: max tokens {} must be >= 0", options_.max_tokens);
  use_drafter_ = options_.method == DraftMethod::Drafter;
  if (use_drafter_ && drafter_ == nullptr) fail("speculative: draft method 'drafter' needs a loaded drafter");
  validate_for_vocab(options_.sampling, model.vocab_size());
  greedy_ = options_.sampling.greedy();
  vocab_ = model.vocab_size();
  if (options_.continue_cache) {
    fed_ = cache_.offset();
    if (fed_ >= static_cast<int64_t>(prompt_.size()))
      fail("speculative: the cache holds {} tokens but the prompt has only {} (at least one must be fed)", fed_,
           prompt_.size());
  } else {
    cache_.reset();
  }
  if (options_.constraint) {
    if (!options_.constraint.vocabulary) fail("speculative: a grammar constraint needs the vocabulary's token bytes");
    // With ignore_eos the grammar's completion ends the generation instead of an EOS token.
    masker_ = std::make_unique<grammar::TokenMasker>(options_.constraint.grammar, options_.constraint.vocabulary,
                                                     static_cast<size_t>(vocab_),
                                                     options_.ignore_eos ? std::vector<int32_t>{} : eos_);
    grammar_state_.emplace(options_.constraint.grammar);
  }
  res_.stats.prompt_tokens = static_cast<int64_t>(prompt_.size());
  res_.stop_reason = "max_tokens";
  context_ = prompt_;
  if (options_.max_tokens == 0) phase_ = Phase::Done;
}

bool SpeculativeSession::is_eos(int32_t t) const {
  return !options_.ignore_eos && std::binary_search(eos_.begin(), eos_.end(), t);
}

SequenceRows SpeculativeSession::next_step(int64_t max_prefill_rows, ThreadPool& pool) {
  if (phase_ == Phase::Done) fail("speculative: next_step() on a finished session");
  SequenceRows rows;
  rows.cache = &cache_;
  if (phase_ == Phase::Prefill) {
    if (max_prefill_rows < 1) fail("speculative: a prefill step needs at least one row (got {})", max_prefill_rows);
    chunk_rows_ = std::min({prefill_remaining(), max_prefill_rows, cache_.options().max_chunk});
    const bool last = chunk_rows_ == prefill_remaining();
    rows.tokens =
        std::span<const int32_t>(prompt_).subspan(static_cast<size_t>(fed_), static_cast<size_t>(chunk_rows_));
    rows.request.rows = last ? OutputRows::Last : OutputRows::None;
    rows.request.logits = last;
    rows.request.hidden = last && use_drafter_;
    return rows;
  }
  begin_round();
  while (const std::optional<DraftRow> row = draft_row()) {
    const auto t0 = Clock::now();
    DraftStep step = drafter_->step(row->token, row->hidden, cache_, row->k, pool);
    add_draft(std::move(step), ms_since(t0));
  }
  return verify_rows();
}

int64_t SpeculativeSession::gamma_room() const {
  return std::max<int64_t>(0, std::min(max_gamma_, model_.max_context() - cache_.offset() - 1));
}

void SpeculativeSession::begin_round() {
  if (phase_ != Phase::Decode) fail("speculative: begin_round() outside decoding");
  if (drafting_) fail("speculative: begin_round() while a round is being drafted");
  round_scheduled_ = gamma_follows_load() && scheduled_gamma_ >= 0;
  int64_t gamma = options_.gamma.fixed;
  if (round_scheduled_) {
    gamma = scheduled_gamma_;
  } else if (options_.gamma.automatic) {
    gamma = policy_.choose();
  }
  round_gamma_ = std::min(gamma, gamma_room());
  drafting_ = true;
  drafts_.clear();
  qs_.clear();
  draft_ms_ = 0.0;
  if (round_gamma_ <= 0) return;
  if (use_drafter_) {
    draft_token_ = context_.back();
    draft_hidden_ = g_;
    draft_state_ = grammar_state_;
    draft_blocked_ = false;
  } else {
    const auto t0 = Clock::now();
    drafts_ = prompt_lookup_drafts(context_, round_gamma_, options_.lookup);
    truncate_drafts_to_constraint();
    draft_ms_ = ms_since(t0);
  }
}

std::optional<DraftRow> SpeculativeSession::draft_row() const {
  if (!drafting_ || !use_drafter_ || draft_blocked_ || static_cast<int64_t>(drafts_.size()) >= round_gamma_)
    return std::nullopt;
  return DraftRow{draft_token_, draft_hidden_.data(), &cache_, static_cast<int64_t>(drafts_.size())};
}

// A drafter step's result: its greedy token, or with sampling a token drawn from its candidates'
// distribution q (kept for the verification); the next step chains its post_projection. Under a
// constraint the candidates are masked by the grammar state after the drafts so far, and drafting
// stops where the grammar allows none.
void SpeculativeSession::add_draft(DraftStep step, double draft_ms) {
  if (!draft_row()) fail("speculative: add_draft() with no draft step pending");
  draft_ms_ += draft_ms;
  if (draft_state_ && !constrain_draft_step(step, *draft_state_)) {
    draft_blocked_ = true;
    return;
  }
  int32_t d = step.token;
  if (!greedy_) {
    qs_.push_back(
        candidate_distribution(vocab_, step.candidate_ids, step.candidate_scores, options_.sampling.temperature));
    d = qs_.back().sample(draft_rng_);
  }
  drafts_.push_back(d);
  if (draft_state_ && !masker_->accept_token(*draft_state_, d)) draft_blocked_ = true;
  draft_token_ = d;
  draft_hidden_ = std::move(step.post_projection);
}

SequenceRows SpeculativeSession::verify_rows() {
  if (!drafting_) fail("speculative: verify_rows() before begin_round()");
  if (draft_row())
    fail("speculative: verify_rows() while {} of {} drafts are missing",
         round_gamma_ - static_cast<int64_t>(drafts_.size()), round_gamma_);
  finish_proposals();
  drafting_ = false;
  step_tokens_.assign(1, context_.back());  // the pending token: emitted, not yet fed
  step_tokens_.insert(step_tokens_.end(), drafts_.begin(), drafts_.end());
  chunk_rows_ = static_cast<int64_t>(step_tokens_.size());
  SequenceRows rows;
  rows.cache = &cache_;
  rows.tokens = step_tokens_;
  rows.request.rows = OutputRows::All;
  rows.request.logits = true;
  rows.request.hidden = use_drafter_;
  return rows;
}

void SpeculativeSession::finish_proposals() {
  const int64_t gamma = round_gamma_;
  if (options_.override_drafts) {
    options_.override_drafts(DraftRoundInfo{context_, prompt_.size(), res_.stats.rounds, gamma}, drafts_);
    if (static_cast<int64_t>(drafts_.size()) > gamma)
      fail("speculative: the draft override returned {} drafts for a round of gamma {}", drafts_.size(), gamma);
    for (int32_t d : drafts_)
      if (d < 0 || d >= vocab_) fail("speculative: the draft override returned token {} outside [0, {})", d, vocab_);
    // The override's drafts are deterministic proposals: their q is a point mass.
    if (!greedy_) qs_.clear();
  }
  if (!greedy_)  // deterministic proposals (lookup, override)
    for (size_t i = qs_.size(); i < drafts_.size(); ++i)
      qs_.push_back(TokenDistribution::point_mass(vocab_, drafts_[i]));
}

void SpeculativeSession::complete_step(const ForwardOutput& out, double step_ms) {
  if (phase_ == Phase::Done) fail("speculative: complete_step() on a finished session");
  if (phase_ == Phase::Prefill) {
    fed_ += chunk_rows_;
    res_.stats.prefill_ms += step_ms;
    if (prefill_remaining() == 0) finish_prefill(out);
    return;
  }
  finish_round(out, step_ms);
}

void SpeculativeSession::finish_prefill(const ForwardOutput& out) {
  res_.stats.target_calls = 1;
  if (use_drafter_) g_.assign(out.hidden_row(0), out.hidden_row(0) + out.hidden_size);
  const TokenHistory history{context_, prompt_.size()};
  const int32_t first = sample_token({out.logits_row(0), static_cast<size_t>(vocab_)}, history, options_.sampling,
                                     verify_rng_, constraint_mask(grammar_state_ ? &*grammar_state_ : nullptr))
                            .id;
  decode_start_ = Clock::now();
  phase_ = Phase::Decode;
  continue_or_finish(emit(first, out.logits_row(0)) && step_done());
}

void SpeculativeSession::finish_round(const ForwardOutput& out, double verify_ms) {
  const int64_t round_gamma = static_cast<int64_t>(drafts_.size());
  history_ = context_;
  history_.insert(history_.end(), drafts_.begin(), drafts_.end());
  auto row_history = [&](int64_t j) {
    return TokenHistory{std::span<const int32_t>(history_.data(), context_.size() + static_cast<size_t>(j)),
                        prompt_.size()};
  };
  auto row_logits = [&](int64_t j) {
    return std::span<const float>(out.logits_row(static_cast<size_t>(j)), static_cast<size_t>(vocab_));
  };
  const SamplingParams& params = options_.sampling;
  // Each row is masked with the grammar state of its own prefix: the emitted state advanced along
  // the drafts accepted before it.
  std::optional<grammar::GrammarMatcher> row_state = grammar_state_;
  auto row_mask = [&] { return constraint_mask(row_state ? &*row_state : nullptr); };
  auto accept_into_row_state = [&](int32_t draft) { return !row_state || masker_->accept_token(*row_state, draft); };
  int64_t a = 0;
  int32_t target_token = 0;
  if (greedy_) {
    for (;; ++a) {
      target_token = sample_token(row_logits(a), row_history(a), params, verify_rng_, row_mask()).id;
      if (a == round_gamma || drafts_[static_cast<size_t>(a)] != target_token) break;
      if (!accept_into_row_state(target_token)) break;  // a forced fallback token: emit() ends the run
    }
  } else {
    for (; a < round_gamma; ++a) {
      const TokenDistribution p = build_distribution(row_logits(a), row_history(a), params, row_mask()).p;
      const DraftVerdict v = verify_draft(drafts_[static_cast<size_t>(a)], p, qs_[static_cast<size_t>(a)], verify_rng_);
      if (!v.accepted) {
        target_token = v.token;
        break;
      }
      accept_into_row_state(drafts_[static_cast<size_t>(a)]);  // p > 0: the grammar allows it
    }
    if (a == round_gamma)  // every draft accepted: the bonus token from the last row
      target_token = build_distribution(row_logits(a), row_history(a), params, row_mask()).p.sample(verify_rng_);
  }
  if (a < round_gamma) cache_.rollback(round_gamma - a);
  res_.cache_tail.push_back(context_.back());
  res_.cache_tail.insert(res_.cache_tail.end(), drafts_.begin(), drafts_.begin() + a);

  SpeculativeStats& st = res_.stats;
  st.rounds += 1;
  st.target_calls += 1;
  st.drafted += round_gamma;
  st.accepted += a;
  st.gamma_histogram[round_gamma] += 1;
  st.draft_ms += draft_ms_;
  st.verify_ms += verify_ms;
  if (!options_.gamma.automatic || round_scheduled_) {
    // Fixed or scheduled gamma: only the acceptance is this session's (a scheduler weighs it).
    policy_.record_acceptance(round_gamma, a);
  } else if (greedy_) {
    policy_.record(round_gamma, a, draft_ms_, verify_ms);
  } else {
    // Sampled tokens depend on the gamma sequence: choose it from acceptance alone (nominal
    // costs) so that a seed reproduces the same text on every run and machine.
    policy_.record(round_gamma, a, kNominalDraftStepCost * static_cast<double>(round_gamma),
                   1.0 + kNominalVerifyRowCost * static_cast<double>(round_gamma));
  }
  if (options_.trace) res_.rounds.push_back(SpecRound{drafts_, a, draft_ms_, verify_ms});
  if (use_drafter_)
    g_.assign(out.hidden_row(static_cast<size_t>(a)), out.hidden_row(static_cast<size_t>(a)) + out.hidden_size);

  bool going = true;
  for (int64_t i = 0; i < a && going; ++i)
    going = emit(drafts_[static_cast<size_t>(i)], out.logits_row(static_cast<size_t>(i)));
  if (going) going = emit(target_token, out.logits_row(static_cast<size_t>(a)));
  continue_or_finish(going && step_done());
}

// Emits one token (chosen from `logits`) the way plain decoding would; false = generation stops here.
bool SpeculativeSession::emit(int32_t t, const float* logits) {
  if (is_eos(t)) {
    res_.stop_reason = "eos";
    return false;
  }
  if (!advance_constraint(t)) {
    res_.stop_reason = "grammar";
    return false;
  }
  res_.tokens.push_back(t);
  context_.push_back(t);
  if (on_token_ && !on_token_(t)) {
    res_.stop_reason = "callback";
    return false;
  }
  if (options_.on_emit && !options_.on_emit(t, std::span<const float>(logits, static_cast<size_t>(vocab_)))) {
    res_.stop_reason = "callback";
    return false;
  }
  if (static_cast<int64_t>(res_.tokens.size()) >= options_.max_tokens) {
    res_.stop_reason = "max_tokens";
    return false;
  }
  if (grammar_state_ && grammar_state_->finished()) {  // only the end may follow
    res_.stop_reason = "eos";
    return false;
  }
  return true;
}

AllowedTokens SpeculativeSession::constraint_mask(const grammar::GrammarMatcher* state) {
  if (!masker_ || state == nullptr) return {};
  return masker_->mask(*state);
}

// Masks one drafter step by the grammar state after the drafts so far: disallowed candidates get
// score -inf (so the sampled q excludes them) and the greedy choice becomes the best allowed one.
// False when no candidate is allowed.
bool SpeculativeSession::constrain_draft_step(DraftStep& step, const grammar::GrammarMatcher& state) {
  grammar::GrammarMatcher probe = state;
  if (greedy_ && masker_->accept_token(probe, step.token)) return true;  // the usual case: no mask needed
  const AllowedTokens allowed = masker_->mask(state);
  auto is_allowed = [&](int32_t id) { return (allowed[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; };
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  int64_t best = -1;
  for (size_t i = 0; i < step.candidate_ids.size(); ++i) {
    const int32_t id = step.candidate_ids[i];
    if (!is_allowed(id) || std::isnan(step.candidate_scores[i])) {
      step.candidate_scores[i] = kNegInf;
      continue;
    }
    const auto b = static_cast<size_t>(best);
    if (best < 0 || step.candidate_scores[i] > step.candidate_scores[b] ||
        (step.candidate_scores[i] == step.candidate_scores[b] && id < step.candidate_ids[b]))
      best = static_cast<int64_t>(i);
  }
  if (best < 0 || !(step.candidate_scores[static_cast<size_t>(best)] > kNegInf)) return false;
  step.token = step.candidate_ids[static_cast<size_t>(best)];
  return true;
}

// Prompt-lookup drafts stop at the first one the grammar does not allow (it could never be accepted).
void SpeculativeSession::truncate_drafts_to_constraint() {
  if (!grammar_state_) return;
  grammar::GrammarMatcher state = *grammar_state_;
  size_t keep = 0;
  while (keep < drafts_.size() && masker_->accept_token(state, drafts_[keep])) ++keep;
  drafts_.resize(keep);
}

bool SpeculativeSession::advance_constraint(int32_t token) {
  return !grammar_state_ || masker_->accept_token(*grammar_state_, token);
}

// Ends a decode step whose tokens were all emitted; false = generation stops here.
bool SpeculativeSession::step_done() {
  if (options_.on_step && !options_.on_step()) {
    res_.stop_reason = "callback";
    return false;
  }
  return true;
}

void SpeculativeSession::continue_or_finish(bool going) {
  if (going && cache_.offset() + 1 > model_.max_context()) {
    res_.stop_reason = "context";
    going = false;
  }
  if (!going) finish();
}

void SpeculativeSession::stop() {
  if (phase_ == Phase::Done) return;
  res_.stop_reason = "callback";
  finish();
}

void SpeculativeSession::finish() {
  if (phase_ == Phase::Decode) res_.stats.decode_ms = ms_since(decode_start_);
  res_.stats.generated_tokens = static_cast<int64_t>(res_.tokens.size());
  phase_ = Phase::Done;
}

}  // namespace specula
