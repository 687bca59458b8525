#include "specula/spec/speculative.h"

#include <algorithm>
#include <chrono>

#include "specula/sample/logits_pipeline.h"
#include "specula/sample/rng.h"
#include "specula/sample/sampler.h"
#include "specula/sample/speculative_sampling.h"
#include "specula/spec/gamma_policy.h"
#include "specula/util/error.h"

namespace specula {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Streams of the run's seed: the verifier (target draws) and the drafter never shift each other.
constexpr uint64_t kVerifyStream = 0;
constexpr uint64_t kDraftStream = 1;

// Costs relative to one decode step that `--gamma auto` assumes when sampling (see the record call).
constexpr double kNominalDraftStepCost = 0.03;
constexpr double kNominalVerifyRowCost = 0.05;

}  // namespace


SpeculativeResult generate_speculative(const TargetModel& model, TargetCache& cache, const Drafter* drafter,
                                       std::span<const int32_t> prompt, const SpeculativeOptions& options,
                                       ThreadPool& pool, const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) fail("speculative: the prompt is empty (it must hold at least the BOS token)");
  if (options.max_tokens < 0) fail("speculative: max tokens {} must be >= 0", options.max_tokens);
  const bool use_drafter = options.method == DraftMethod::Drafter;
  if (use_drafter && drafter == nullptr) fail("speculative: draft method 'drafter' needs a loaded drafter");
  const SamplingParams& params = options.sampling;
  validate_for_vocab(params, model.vocab_size());
  const bool greedy = params.greedy();
  const int64_t reserve = cache.options().rollback_reserve;
  if (options.gamma.automatic) {
    if (options.gamma.max_gamma < 0) fail("speculative: max gamma {} must be >= 0", options.gamma.max_gamma);
  } else {
    if (options.gamma.fixed < 0) fail("speculative: gamma {} must be >= 0", options.gamma.fixed);
    if (options.gamma.fixed > reserve)
      fail("speculative: gamma {} exceeds the target cache's rollback reserve {} (raise TargetOptions::rollback_reserve)",
           options.gamma.fixed, reserve);
  }
  const std::vector<int32_t> eos = model.eos_token_ids();
  auto is_eos = [&](int32_t t) { return !options.ignore_eos && std::binary_search(eos.begin(), eos.end(), t); };
  const int64_t vocab = model.vocab_size();

  int64_t cached = 0;  // prompt tokens already in the cache
  if (options.continue_cache) {
    cached = cache.offset();
    if (cached >= static_cast<int64_t>(prompt.size()))
      fail("speculative: the cache holds {} tokens but the prompt has only {} (at least one must be fed)", cached,
           prompt.size());
  }

  SpeculativeResult res;
  SpeculativeStats& st = res.stats;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  res.stop_reason = "max_tokens";
  if (!options.continue_cache) cache.reset();
  if (options.max_tokens == 0) return res;

  Rng verify_rng(params.seed, kVerifyStream);
  Rng draft_rng(params.seed, kDraftStream);
  std::vector<int32_t> context(prompt.begin(), prompt.end());  // prompt + emitted
  const size_t prompt_length = prompt.size();

  // Emits one token (chosen from `logits`) the way plain decoding would; false = generation stops here.
  auto emit = [&](int32_t t, const float* logits) {
    if (is_eos(t)) {
      res.stop_reason = "eos";
      return false;
    }
    res.tokens.push_back(t);
    context.push_back(t);
    if (on_token && !on_token(t)) {
      res.stop_reason = "callback";
      return false;
    }
    if (options.on_emit && !options.on_emit(t, std::span<const float>(logits, static_cast<size_t>(vocab)))) {
      res.stop_reason = "callback";
      return false;
    }
    if (static_cast<int64_t>(res.tokens.size()) >= options.max_tokens) {
      res.stop_reason = "max_tokens";
      return false;
    }
    return true;
  };

  // ---- prefill ----
  ForwardRequest prefill;
  prefill.rows = OutputRows::Last;
  prefill.logits = true;
  prefill.hidden = use_drafter;
  auto t0 = Clock::now();
  ForwardOutput out = model.forward(cache, prompt.subspan(static_cast<size_t>(cached)), prefill, pool);
  st.prefill_ms = ms_since(t0);
  st.target_calls = 1;
  std::vector<float> g;  // the drafter's hidden input for the next round
  if (use_drafter) g.assign(out.hidden_row(0), out.hidden_row(0) + out.hidden_size);
  const int32_t first =
      sample_token({out.logits_row(0), static_cast<size_t>(vocab)}, {context, prompt_length}, params, verify_rng).id;

  const auto decode_start = Clock::now();
  const int64_t max_gamma = options.gamma.automatic ? std::min(options.gamma.max_gamma, reserve) : options.gamma.fixed;
  AutoGamma policy(max_gamma);
  std::vector<int32_t> drafts;
  std::vector<TokenDistribution> qs;
  std::vector<int32_t> history;
  std::vector<int32_t> verify_tokens;
  ForwardRequest verify;
  verify.rows = OutputRows::All;
  verify.logits = true;
  verify.hidden = use_drafter;

  // Ends a decode step whose tokens were all emitted; false = generation stops here.
  auto step_done = [&] {
    if (options.on_step && !options.on_step()) {
      res.stop_reason = "callback";
      return false;
    }
    return true;
  };

  if (emit(first, out.logits_row(0)) && step_done()) {
    for (;;) {
      const int64_t offset = cache.offset();
      if (offset + 1 > model.max_context()) {
        res.stop_reason = "context";
        break;
      }
      int64_t gamma = options.gamma.automatic ? policy.choose() : options.gamma.fixed;
      gamma = std::min(gamma, model.max_context() - offset - 1);
      const int32_t pending = context.back();

      // ---- propose ----
      t0 = Clock::now();
      drafts.clear();
      qs.clear();
      if (gamma > 0) {
        if (use_drafter) {
          int32_t t = pending;
          std::vector<float> gcur = g;
          for (int64_t k = 0; k < gamma; ++k) {
            DraftStep step = drafter->step(t, gcur.data(), cache, k, pool);
            int32_t d = step.token;
            if (!greedy) {
              qs.push_back(candidate_distribution(vocab, step.candidate_ids, step.candidate_scores, params.temperature));
              d = qs.back().sample(draft_rng);
            }
            drafts.push_back(d);
            gcur = std::move(step.post_projection);
            t = d;
          }
        } else {
          drafts = prompt_lookup_drafts(context, gamma, options.lookup);
        }
      }
      if (options.override_drafts) {
        options.override_drafts(DraftRoundInfo{context, prompt_length, st.rounds, gamma}, drafts);
        if (static_cast<int64_t>(drafts.size()) > gamma)
          fail("speculative: the draft override returned {} drafts for a round of gamma {}", drafts.size(), gamma);
        for (int32_t d : drafts)
          if (d < 0 || d >= vocab) fail("speculative: the draft override returned token {} outside [0, {})", d, vocab);
        // The override's drafts are deterministic proposals: their q is a point mass.
        if (!greedy) qs.clear();
      }
      if (!greedy && qs.size() < drafts.size())  // deterministic proposals (lookup)
        for (size_t i = qs.size(); i < drafts.size(); ++i) qs.push_back(TokenDistribution::point_mass(vocab, drafts[i]));
      const int64_t round_gamma = static_cast<int64_t>(drafts.size());
      const double draft_ms = ms_since(t0);

      // ---- verify: one forward of [pending] + drafts ----
      t0 = Clock::now();
      verify_tokens.assign(1, pending);
      verify_tokens.insert(verify_tokens.end(), drafts.begin(), drafts.end());
      out = model.forward(cache, verify_tokens, verify, pool);
      history = context;
      history.insert(history.end(), drafts.begin(), drafts.end());
      auto row_history = [&](int64_t j) {
        return TokenHistory{std::span<const int32_t>(history.data(), context.size() + static_cast<size_t>(j)),
                            prompt_length};
      };
      auto row_logits = [&](int64_t j) {
        return std::span<const float>(out.logits_row(static_cast<size_t>(j)), static_cast<size_t>(vocab));
      };
      int64_t a = 0;
      int32_t target_token = 0;
      if (greedy) {
        for (;; ++a) {
          target_token = sample_token(row_logits(a), row_history(a), params, verify_rng).id;
          if (a == round_gamma || drafts[static_cast<size_t>(a)] != target_token) break;
        }
      } else {
        for (; a < round_gamma; ++a) {
          const TokenDistribution p = build_distribution(row_logits(a), row_history(a), params).p;
          const DraftVerdict v = verify_draft(drafts[static_cast<size_t>(a)], p, qs[static_cast<size_t>(a)], verify_rng);
          if (!v.accepted) {
            target_token = v.token;
            break;
          }
        }
        if (a == round_gamma)  // every draft accepted: the bonus token from the last row
          target_token = build_distribution(row_logits(a), row_history(a), params).p.sample(verify_rng);
      }
      if (a < round_gamma) cache.rollback(round_gamma - a);
      res.cache_tail.push_back(pending);
      res.cache_tail.insert(res.cache_tail.end(), drafts.begin(), drafts.begin() + a);
      const double verify_ms = ms_since(t0);

      st.rounds += 1;
      st.target_calls += 1;
      st.drafted += round_gamma;
      st.accepted += a;
      st.gamma_histogram[round_gamma] += 1;
      st.draft_ms += draft_ms;
      st.verify_ms += verify_ms;
      if (options.gamma.automatic && round_gamma <= max_gamma) {
        if (greedy) {
          policy.record(round_gamma, a, draft_ms, verify_ms);
        } else {
          // Sampled tokens depend on the gamma sequence: choose it from acceptance alone (nominal
          // costs) so that a seed reproduces the same text on every run and machine.
          policy.record(round_gamma, a, kNominalDraftStepCost * static_cast<double>(round_gamma),
                        1.0 + kNominalVerifyRowCost * static_cast<double>(round_gamma));
        }
      }
      if (options.trace) res.rounds.push_back(SpecRound{drafts, a, draft_ms, verify_ms});
      if (use_drafter) g.assign(out.hidden_row(static_cast<size_t>(a)), out.hidden_row(static_cast<size_t>(a)) + out.hidden_size);

      bool going = true;
      for (int64_t i = 0; i < a && going; ++i)
        going = emit(drafts[static_cast<size_t>(i)], out.logits_row(static_cast<size_t>(i)));
      if (going) going = emit(target_token, out.logits_row(static_cast<size_t>(a)));
      if (!going || !step_done()) break;
    }
  }
  st.decode_ms = ms_since(decode_start);
  st.generated_tokens = static_cast<int64_t>(res.tokens.size());
  return res;
}

}  // namespace specula
