#include "specula/spec/draft_benchmark.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "specula/model/generate.h"
#include "specula/spec/controlled_acceptance.h"
#include "specula/util/error.h"

namespace specula {

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double median_ms(int64_t repeats, F&& f) {
  std::vector<double> t;
  for (int64_t i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<int32_t> random_prompt(const TargetModel& model, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> p{2};
  const auto v = static_cast<uint32_t>(model.vocab_size());
  while (static_cast<int64_t>(p.size()) < n) p.push_back(static_cast<int32_t>(3 + gen() % (v - 3)));
  return p;
}

void check(const TargetModel& model, const DraftBenchOptions& o) {
  if (o.prompt_tokens < 1 || o.repeats < 1 || o.max_width < 2 || o.generate_tokens < 1)
    fail("draft bench: prompt tokens {}, repeats {}, max width {} and generate tokens {} must be positive "
         "(max width >= 2)",
         o.prompt_tokens, o.repeats, o.max_width, o.generate_tokens);
  if (model.vocab_size() < 4) fail("draft bench: vocabulary {} too small", model.vocab_size());
}

}  // namespace

DraftCosts bench_draft_costs(const TargetModel& model, const Drafter& drafter, const DraftBenchOptions& o,
                             ThreadPool& pool) {
  check(model, o);
  TargetCache cache = model.new_cache();
  if (cache.options().rollback_reserve < o.max_width)
    fail("draft bench: verify width {} exceeds the target's rollback reserve {}", o.max_width,
         cache.options().rollback_reserve);
  const std::vector<int32_t> prompt = random_prompt(model, o.prompt_tokens, o.seed);
  ForwardRequest last;
  last.rows = OutputRows::Last;
  last.hidden = true;
  const ForwardOutput out = model.forward(cache, prompt, last, pool);
  const std::vector<float> g(out.hidden_row(0), out.hidden_row(0) + out.hidden_size);
  std::vector<int32_t> rows(static_cast<size_t>(o.max_width), prompt.back());

  DraftCosts c;
  ForwardRequest all;
  all.rows = OutputRows::All;
  all.hidden = true;
  c.decode_ms = median_ms(o.repeats, [&] {
    model.forward(cache, std::span<const int32_t>(rows.data(), 1), last, pool);
    cache.rollback(1);
  });
  c.draft_step_ms = median_ms(o.repeats, [&] { drafter.step(prompt.back(), g.data(), cache, 0, pool); });
  c.verify_ms.assign(static_cast<size_t>(o.max_width + 1), 0.0);
  for (int64_t w = 2; w <= o.max_width; ++w)
    c.verify_ms[static_cast<size_t>(w)] = median_ms(o.repeats, [&] {
      model.forward(cache, std::span<const int32_t>(rows.data(), static_cast<size_t>(w)), all, pool);
      cache.rollback(w);
    });
  return c;
}

std::vector<ControlledAcceptanceRun> bench_controlled_acceptance(const TargetModel& model, const Drafter& drafter,
                                                                 const DraftBenchOptions& o, ThreadPool& pool) {
  check(model, o);
  const std::vector<int32_t> prompt = random_prompt(model, o.prompt_tokens, o.seed);
  TargetCache cache = model.new_cache();
  GenerateOptions go;
  go.max_tokens = o.generate_tokens + 16;  // the reference reaches past the last round's drafts
  go.ignore_eos = true;
  const GenerateResult plain = generate_greedy(model, cache, prompt, go, pool);
  // Plain speed over the same number of tokens the speculative runs emit.
  go.max_tokens = o.generate_tokens;
  const double plain_tps = generate_greedy(model, cache, prompt, go, pool).stats.decode_tok_per_s();

  std::vector<ControlledAcceptanceRun> runs;
  for (double p : o.acceptance) {
    for (const std::string& gs : o.gammas) {
      SpeculativeOptions so;
      so.max_tokens = o.generate_tokens;
      so.ignore_eos = true;
      so.gamma = parse_gamma_choice(gs);
      so.gamma.max_gamma = std::min<int64_t>(so.gamma.max_gamma, cache.options().rollback_reserve);
      so.override_drafts = controlled_acceptance(plain.tokens, p, model.vocab_size(), o.seed);
      const SpeculativeResult r = generate_speculative(model, cache, &drafter, prompt, so, pool);
      if (r.tokens != std::vector<int32_t>(plain.tokens.begin(), plain.tokens.begin() + o.generate_tokens))
        fail("draft bench: speculative output differs from plain greedy (p {}, gamma {})", p, gs);
      ControlledAcceptanceRun run;
      run.p = p;
      run.gamma = gs;
      run.plain_tok_per_s = plain_tps;
      run.spec_tok_per_s = r.stats.decode_tok_per_s();
      run.speedup = plain_tps > 0 ? run.spec_tok_per_s / plain_tps : 0.0;
      run.ideal_speedup = ideal_speedup(p, so.gamma.automatic ? so.gamma.max_gamma : so.gamma.fixed);
      run.drafted = r.stats.drafted;
      run.accepted = r.stats.accepted;
      runs.push_back(run);
    }
  }
  return runs;
}

}  // namespace specula
