#include "specula/speculative/draft_benchmark.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "specula/speculative/controlled_acceptance.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"

namespace specula {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

double time_draft_step(const TargetModel& model, TargetCache& cache, const Drafter& drafter, int32_t token,
                       const float* g, int64_t repeats, ThreadPool& pool) {
  if (repeats < 1) fail("draft bench: repeats {} must be >= 1", repeats);
  drafter.step(token, g, cache, 0, pool);  // untimed: faults the drafter's mapped weights in
  ForwardRequest last;
  last.rows = OutputRows::Last;
  double total = 0.0;
  for (int64_t i = 0; i < repeats; ++i) {
    model.forward(cache, std::span<const int32_t>(&token, 1), last, pool);
    cache.rollback(1);
    const auto t0 = Clock::now();
    drafter.step(token, g, cache, 0, pool);
    total += ms_since(t0);
  }
  return total / static_cast<double>(repeats);
}

SpeculativeResult run_controlled_acceptance(const TargetModel& model, TargetCache& cache, const Drafter& drafter,
                                            std::span<const int32_t> prompt, const std::vector<int32_t>& reference,
                                            double p, const GammaChoice& gamma, int64_t tokens, uint32_t seed,
                                            ThreadPool& pool) {
  if (tokens < 1) fail("controlled acceptance: tokens {} must be >= 1", tokens);
  const int64_t largest = gamma.automatic ? gamma.max_gamma : gamma.fixed;
  if (static_cast<int64_t>(reference.size()) < tokens + largest)
    fail("controlled acceptance: reference of {} tokens is shorter than {} tokens + gamma {}", reference.size(), tokens,
         largest);
  SpeculativeOptions so;
  so.max_tokens = tokens;
  so.ignore_eos = true;
  so.gamma = gamma;
  so.override_drafts = controlled_acceptance(reference, p, model.vocab_size(), seed);
  SpeculativeResult r = generate_speculative(model, cache, &drafter, prompt, so, pool);
  if (!std::equal(r.tokens.begin(), r.tokens.end(), reference.begin()) ||
      static_cast<int64_t>(r.tokens.size()) != tokens)
    fail("controlled acceptance: speculative output differs from plain greedy (p {}, gamma {}, {} of {} tokens)", p,
         gamma.automatic ? std::string("auto") : std::to_string(gamma.fixed), r.tokens.size(), tokens);
  return r;
}

}  // namespace specula
