// Speculative acceptance under a JSON Schema constraint, next to the same runs unconstrained, on
// the tiny golden model pair tests/data/goldens/dense-q5g64-window4 (random weights; the drafter
// was built to copy the pending token, so its acceptance is synthetic: what this shows is the
// constrained figure against the unconstrained one, not a real model's acceptance).
//   BM_Acceptance/constrained:C/gamma:G/p:P   greedy speculative decoding of 6 prompts
//     P = 0:   the real drafter (constrained runs mask its candidates by the grammar state)
//     P > 0:   controlled acceptance (speculative/controlled_acceptance.h): after the drafter ran,
//              each draft is the reference continuation (the plain greedy run under the same
//              constraint or none) with probability P %, a wrong token otherwise
// Counters, over all prompts: acceptance = accepted / drafted, tokens_per_verify = tokens / verify
// forwards, drafts_per_round = drafted / rounds (a constraint ends drafting where the drafter's
// candidates hold no allowed token), tokens = tokens generated. Unconstrained runs generate
// 64 tokens ignoring EOS; constrained runs end with the JSON document.
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "golden_vocabulary.h"
#include "specula/grammar/json_schema.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/controlled_acceptance.h"
#include "specula/speculative/speculative.h"
#include "specula/util/thread_pool.h"

namespace {

using namespace specula;

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 12},
  "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4},
  "n": {"type": "integer", "minimum": -20, "maximum": 300},
  "ok": {"type": "boolean"},
  "sub": {"type": "object", "properties": {"x": {"type": ["number", "null"], "maximum": 99.5}}, "required": ["x"]}},
  "required": ["name", "tags", "n", "ok", "sub"], "additionalProperties": false})";

struct Pair {
  std::unique_ptr<TargetModel> model;
  std::unique_ptr<Drafter> drafter;
  grammar::TokenConstraint constraint;
};

const Pair& pair() {
  static const Pair p = [] {
    const auto dir = std::filesystem::path(__FILE__).parent_path().parent_path() / "tests" / "data" / "goldens" /
                     "dense-q5g64-window4";
    Pair out;
    out.model = TargetModel::load((dir / "model").string());
    out.drafter = Drafter::load((dir / "drafter").string(), *out.model);
    out.constraint.grammar = std::make_shared<const grammar::Grammar>(
        grammar::grammar_from_json_schema(nlohmann::ordered_json::parse(kSchema)));
    out.constraint.vocabulary = std::make_shared<const grammar::TokenTrie>(test::golden_vocabulary(*out.model));
    return out;
  }();
  return p;
}

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out{{2, 17, 99, 4, 250}};
  std::mt19937 rng(5);
  while (out.size() < 6) {
    std::vector<int32_t> p{2};
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<int32_t>(3 + rng() % 500));
    out.push_back(p);
  }
  return out;
}

SpeculativeResult generate(const std::vector<int32_t>& prompt, bool constrained, int64_t gamma, bool use_drafter,
                           DraftOverride override_drafts, ThreadPool& pool) {
  const Pair& p = pair();
  SpeculativeOptions o;
  if (constrained) {
    o.constraint = p.constraint;
    o.max_tokens = 400;
  } else {
    o.max_tokens = 64;
    o.ignore_eos = true;
  }
  o.gamma.fixed = gamma;
  if (!use_drafter) o.method = DraftMethod::Lookup;
  o.override_drafts = std::move(override_drafts);
  TargetCache cache = p.model->new_cache();
  return generate_speculative(*p.model, cache, use_drafter ? p.drafter.get() : nullptr, prompt, o, pool);
}

void BM_Acceptance(benchmark::State& state) {
  const bool constrained = state.range(0) != 0;
  const int64_t gamma = state.range(1);
  const double p = static_cast<double>(state.range(2)) / 100.0;
  ThreadPool pool(1);
  SpeculativeStats total;
  for (auto _ : state) {
    total = {};
    uint64_t seed = 1;
    for (const std::vector<int32_t>& prompt : prompts()) {
      DraftOverride forced;
      if (p > 0) {
        const SpeculativeResult reference = generate(prompt, constrained, 0, false, {}, pool);
        std::vector<int32_t> ref = reference.tokens;
        if (reference.stop_reason == "eos") ref.push_back(pair().model->eos_token_ids().front());
        forced = controlled_acceptance(ref, p, pair().model->vocab_size(), seed++);
      }
      const SpeculativeStats s = generate(prompt, constrained, gamma, true, forced, pool).stats;
      total.generated_tokens += s.generated_tokens;
      total.drafted += s.drafted;
      total.accepted += s.accepted;
      total.rounds += s.rounds;
    }
  }
  state.counters["acceptance"] = total.acceptance_rate();
  // The first token comes from the prefill; every later one from a verify forward.
  state.counters["tokens_per_verify"] =
      total.rounds > 0 ? static_cast<double>(total.generated_tokens - static_cast<int64_t>(prompts().size())) /
                             static_cast<double>(total.rounds)
                       : 0.0;
  state.counters["drafts_per_round"] =
      total.rounds > 0 ? static_cast<double>(total.drafted) / static_cast<double>(total.rounds) : 0.0;
  state.counters["tokens"] = static_cast<double>(total.generated_tokens);
}
BENCHMARK(BM_Acceptance)
    ->ArgNames({"constrained", "gamma", "p"})
    ->ArgsProduct({{0, 1}, {1, 3, 4}, {0, 50, 80}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
