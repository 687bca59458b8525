// Speculative decoding is exact: on the tiny golden models (sliding windows 4..8, both drafter
// heads, quantized and dense targets, PLE / KV sharing / k_eq_v / MoE), greedy speculative output
// equals plain greedy (generate_greedy) token for token for gamma 1..8 with contexts many times
// longer than the window, with f32 KV caches and (on a sample of the models) bf16 ones; forced drafts (all right, all
// wrong, a random mix, EOS inside the accepted run, the budget ending mid-round) and prompt-lookup drafting too;
// speculative sampling draws the first two tokens from exactly the distribution plain sampling draws from (chi-square
// against the exact joint, false-alarm rate 1e-3 per test); mismatched drafter/target pairs fail
// at load with clear errors.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "spec_golden_util.h"
#include "specula/model/drafter.h"
#include "specula/model/generate.h"
#include "specula/model/target_model.h"
#include "specula/sample/logits_pipeline.h"
#include "specula/speculative/controlled_acceptance.h"
#include "specula/speculative/speculative.h"
#include "specula/synth/plan.h"
#include "specula/synth/writer.h"
#include "specula/util/error.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using spec_test::golden_case_names;
using spec_test::golden_prompt;
using spec_test::golden_root;

std::vector<int32_t> plain_greedy(const TargetModel& model, std::span<const int32_t> prompt, int64_t max_tokens,
                                  bool ignore_eos, ThreadPool& pool, std::string* stop = nullptr) {
  TargetCache cache = model.new_cache();
  GenerateOptions g;
  g.max_tokens = max_tokens;
  g.ignore_eos = ignore_eos;
  GenerateResult r = generate_greedy(model, cache, prompt, g, pool);
  if (stop) *stop = r.stop_reason;
  return r.tokens;
}

// ---- greedy equivalence on every golden model ----

struct SpecCase {
  std::string name;  // golden case
  KvType kv_type = KvType::F32;
  std::vector<int64_t> gammas = {1, 2, 3, 4, 5, 6, 7, 8};  // fixed gammas run (then auto and lookup)
};

class SpecEquivalence : public ::testing::TestWithParam<SpecCase> {};

TEST_P(SpecEquivalence, GreedyEqualsPlainForGamma1To8PastTheWindow) {
  const auto dir = golden_root() / GetParam().name;
  TargetOptions to;
  to.kv_type = GetParam().kv_type;
  auto model = TargetModel::load((dir / "model").string(), to);
  const int64_t window = model->config().text.sliding_window;
  std::vector<int32_t> prompt = golden_prompt(GetParam().name);
  // Prompt alone several windows long; generation as long again.
  while (static_cast<int64_t>(prompt.size()) < 3 * window)
    prompt.insert(prompt.end(), prompt.begin() + 1, prompt.end());
  const int64_t max_tokens = std::max<int64_t>(4 * window, 32);
  ThreadPool pool(1);
  const std::vector<int32_t> ref = plain_greedy(*model, prompt, max_tokens, true, pool);
  ASSERT_EQ(static_cast<int64_t>(ref.size()), max_tokens);
  auto drafter = Drafter::load((dir / "drafter").string(), *model);
  TargetCache cache = model->new_cache();
  for (int64_t gamma : GetParam().gammas) {
    SpeculativeOptions o;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    o.gamma.fixed = gamma;
    const SpeculativeResult r = generate_speculative(*model, cache, drafter.get(), prompt, o, pool);
    EXPECT_EQ(r.tokens, ref) << "gamma " << gamma;
    EXPECT_EQ(r.stats.target_calls, 1 + r.stats.rounds);
    EXPECT_EQ(r.stats.drafted, gamma * r.stats.rounds);
  }
  // gamma auto and prompt lookup go through the same verify loop.
  SpeculativeOptions o;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  o.gamma.automatic = true;
  EXPECT_EQ(generate_speculative(*model, cache, drafter.get(), prompt, o, pool).tokens, ref) << "gamma auto";
  o.method = DraftMethod::Lookup;
  o.gamma.automatic = false;
  o.gamma.fixed = 4;
  const SpeculativeResult lk = generate_speculative(*model, cache, nullptr, prompt, o, pool);
  EXPECT_EQ(lk.tokens, ref) << "lookup";
  EXPECT_GT(lk.stats.drafted, 0) << "the repeated prompt gives lookup something to propose";
}

// Sampled tokens depend on the gamma sequence, so with sampling `auto` must choose gamma from
// acceptance alone: the same seed gives the same rounds and tokens whatever the timings (here: 1 vs
// 2 threads, a busy or idle machine).
TEST(SpecSamplingSeed, AutoGammaReproducesWhateverTheTimings) {
  const std::string name = golden_case_names().front();
  const auto dir = golden_root() / name;
  auto model = TargetModel::load((dir / "model").string());
  auto drafter = Drafter::load((dir / "drafter").string(), *model);
  const std::vector<int32_t> prompt = golden_prompt(name);
  SpeculativeOptions o;
  o.max_tokens = 40;
  o.ignore_eos = true;
  o.gamma.automatic = true;
  o.trace = true;
  o.sampling.temperature = 1.0;
  o.sampling.seed = 1234;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<int64_t>> gammas;
  for (int threads : {1, 2, 1}) {
    ThreadPool pool(threads);
    TargetCache cache = model->new_cache();
    const SpeculativeResult r = generate_speculative(*model, cache, drafter.get(), prompt, o, pool);
    tokens.push_back(r.tokens);
    gammas.emplace_back();
    for (const SpecRound& round : r.rounds) gammas.back().push_back(static_cast<int64_t>(round.drafts.size()));
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  EXPECT_EQ(tokens[0], tokens[2]);
  EXPECT_EQ(gammas[0], gammas[1]);
  EXPECT_EQ(gammas[0], gammas[2]);
}

std::vector<SpecCase> spec_cases(const std::vector<std::string>& names) {
  std::vector<SpecCase> cases;
  for (const std::string& n : names) cases.push_back({n});
  return cases;
}

std::string spec_case_name(const ::testing::TestParamInfo<SpecCase>& info) {
  return spec_test::param_name(info.param.name);
}

INSTANTIATE_TEST_SUITE_P(AllCases, SpecEquivalence, ::testing::ValuesIn(spec_cases(golden_case_names())),
                         spec_case_name);
// bf16 KV caches (one gamma, auto and lookup; CI time): a sliding window of 4, and KV sharing with
// per-layer inputs.
INSTANTIATE_TEST_SUITE_P(Bf16Kv, SpecEquivalence,
                         ::testing::Values(SpecCase{"dense-q5g64-window4", KvType::Bf16, {3}},
                                           SpecCase{"e4b-like-q4g64-mlx", KvType::Bf16, {3}}),
                         spec_case_name);
// q8 KV caches: the same two.
INSTANTIATE_TEST_SUITE_P(Q8Kv, SpecEquivalence,
                         ::testing::Values(SpecCase{"dense-q5g64-window4", KvType::Q8, {3}},
                                           SpecCase{"e4b-like-q4g64-mlx", KvType::Q8, {3}}),
                         spec_case_name);

// ---- every tiny synthetic preset (sliding window 16), prompt 3 windows + 4 windows generated ----

TEST(SpecSynthPresets, GreedyEqualsPlainOnEveryTinyPreset) {
  std::string tmpl = (fs::temp_directory_path() / "specula-spec-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path root = tmpl;
  struct Variant {
    std::string preset;
    std::optional<QuantSpec> quant;
  };
  const std::vector<Variant> variants = {{"tiny-dense", std::nullopt},
                                         {"tiny-e4b", QuantSpec{4, 64, "affine"}},
                                         {"tiny-kveq", std::nullopt},
                                         {"tiny-moe", QuantSpec{3, 32, "affine"}}};
  ThreadPool pool(1);
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.preset);
    synth::SynthOptions o;
    o.preset = v.preset;
    o.seed = 11;
    o.quant = v.quant;
    const fs::path dir = root / v.preset;
    synth::write_checkpoint(synth::plan_target(o), (dir / "model").string());
    synth::write_checkpoint(synth::plan_drafter(o), (dir / "drafter").string());
    auto model = TargetModel::load((dir / "model").string());
    auto drafter = Drafter::load((dir / "drafter").string(), *model);
    const int64_t window = model->config().text.sliding_window;
    std::mt19937 gen(5);
    std::vector<int32_t> prompt{2};
    while (static_cast<int64_t>(prompt.size()) < 3 * window)
      prompt.push_back(static_cast<int32_t>(3 + gen() % static_cast<uint32_t>(model->vocab_size() - 3)));
    const int64_t max_tokens = 4 * window;
    const std::vector<int32_t> ref = plain_greedy(*model, prompt, max_tokens, true, pool);
    TargetCache cache = model->new_cache();
    for (int64_t gamma = 1; gamma <= 8; ++gamma) {
      for (DrafterConvention conv : {DrafterConvention::Ollama, DrafterConvention::MlxBun}) {
        if (conv == DrafterConvention::MlxBun && gamma % 4 != 0) continue;  // a sample of the compat mode
        auto d = conv == drafter->convention() ? nullptr : Drafter::load((dir / "drafter").string(), *model, conv);
        SpeculativeOptions so;
        so.max_tokens = max_tokens;
        so.ignore_eos = true;
        so.gamma.fixed = gamma;
        const SpeculativeResult r = generate_speculative(*model, cache, d ? d.get() : drafter.get(), prompt, so, pool);
        EXPECT_EQ(r.tokens, ref) << "gamma " << gamma << " " << drafter_convention_name(conv);
      }
    }
  }
  fs::remove_all(root);
}

// ---- forced drafts ----

struct ForcedFixture : ::testing::Test {
  void SetUp() override {
    dir = golden_root() / "dense-q5g64-window4";
    model = TargetModel::load((dir / "model").string());
    drafter = Drafter::load((dir / "drafter").string(), *model);
    prompt = golden_prompt("dense-q5g64-window4");
    ref = plain_greedy(*model, prompt, 64, true, pool);
  }
  // Drafts for the round: the target's true continuation where `right(i)`, a wrong token elsewhere.
  DraftOverride forced(std::function<bool(int64_t round, size_t i)> right) {
    return [this, right](const DraftRoundInfo& info, std::vector<int32_t>& drafts) {
      const size_t n = info.context.size() - info.prompt_length;  // tokens emitted so far
      drafts.assign(static_cast<size_t>(info.gamma), 0);
      for (size_t i = 0; i < drafts.size(); ++i) {
        const int32_t truth = ref.at(n + i);
        drafts[i] = right(info.round, i) ? truth : static_cast<int32_t>((truth + 1) % model->vocab_size());
      }
    };
  }
  SpeculativeResult run(int64_t gamma, int64_t max_tokens, DraftOverride hook, bool ignore_eos = true,
                        const TargetModel* m = nullptr) {
    const TargetModel& target = m ? *m : *model;
    TargetCache cache = target.new_cache();
    SpeculativeOptions o;
    o.max_tokens = max_tokens;
    o.ignore_eos = ignore_eos;
    o.gamma.fixed = gamma;
    o.trace = true;
    o.override_drafts = std::move(hook);
    return generate_speculative(target, cache, drafter.get(), prompt, o, pool);
  }

  ThreadPool pool{2};
  fs::path dir;
  std::unique_ptr<TargetModel> model;
  std::unique_ptr<Drafter> drafter;
  std::vector<int32_t> prompt, ref;
};

TEST_F(ForcedFixture, AllRight) {
  for (int64_t gamma : {1, 3, 8}) {
    const int64_t max_tokens = 1 + 4 * (gamma + 1);  // the prefill token + 4 full rounds
    const SpeculativeResult r = run(gamma, max_tokens, forced([](int64_t, size_t) { return true; }));
    EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + max_tokens)) << gamma;
    EXPECT_EQ(r.stats.rounds, 4);
    EXPECT_EQ(r.stats.accepted, 4 * gamma);
    EXPECT_EQ(r.stats.drafted, 4 * gamma);
    EXPECT_EQ(r.stats.target_calls, 5);
  }
}

TEST_F(ForcedFixture, AllWrong) {
  for (int64_t gamma : {1, 4, 8}) {
    const SpeculativeResult r = run(gamma, 20, forced([](int64_t, size_t) { return false; }));
    EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + 20)) << gamma;
    EXPECT_EQ(r.stats.accepted, 0);
    EXPECT_EQ(r.stats.rounds, 19);  // one target token per round after the prefill's
    EXPECT_EQ(r.stats.drafted, 19 * gamma);
  }
}

TEST_F(ForcedFixture, RandomMixAcceptsExactlyTheMatchingPrefix) {
  std::mt19937 gen(7);
  std::vector<std::vector<bool>> pattern(64, std::vector<bool>(8));
  for (auto& row : pattern)
    for (size_t i = 0; i < row.size(); ++i) row[i] = gen() % 3 != 0;
  for (int64_t gamma : {2, 5, 8}) {
    const SpeculativeResult r =
        run(gamma, 40, forced([&](int64_t round, size_t i) { return pattern[static_cast<size_t>(round)][i]; }));
    EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + 40)) << gamma;
    int64_t expected_accepted = 0;
    for (size_t k = 0; k < r.rounds.size(); ++k) {
      int64_t a = 0;
      while (a < gamma && pattern[k][static_cast<size_t>(a)]) ++a;
      EXPECT_EQ(r.rounds[k].accepted, a) << "gamma " << gamma << " round " << k;
      expected_accepted += a;
    }
    EXPECT_EQ(r.stats.accepted, expected_accepted);
  }
}

TEST_F(ForcedFixture, BudgetEndingMidRound) {
  // gamma 4, all right: rounds emit 5 tokens each; a budget of 8 ends inside the second round.
  const SpeculativeResult r = run(4, 8, forced([](int64_t, size_t) { return true; }));
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + 8));
  EXPECT_EQ(r.stop_reason, "max_tokens");
  EXPECT_EQ(r.stats.rounds, 2);
  EXPECT_EQ(r.stats.drafted, 8);
  EXPECT_EQ(r.stats.accepted, 8);  // the full matching prefix counts, even past the budget
  EXPECT_EQ(r.stats.target_calls, 3);
}

TEST_F(ForcedFixture, EosInsideTheAcceptedRun) {
  // A copy of the target whose EOS set contains ref[k] for a k that the all-right drafts of
  // gamma 4 place inside round 1's drafts (tokens 6..9), and that did not occur before.
  size_t k = 6;
  while (k < 10 && std::find(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(k), ref[k]) !=
                       ref.begin() + static_cast<std::ptrdiff_t>(k))
    ++k;
  ASSERT_LT(k, 10u) << "no fresh token in 6..9 of the reference";
  const fs::path tmp = fs::temp_directory_path() / ("specula_eos_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  nlohmann::json cfg = read_json_file((dir / "model" / "config.json").string());
  cfg["eos_token_id"] = std::vector<int32_t>{ref[k]};
  if (cfg.contains("text_config") && cfg["text_config"].contains("eos_token_id"))
    cfg["text_config"]["eos_token_id"] = std::vector<int32_t>{ref[k]};
  std::ofstream(tmp / "config.json") << cfg.dump();
  fs::copy_file(dir / "model" / "model.safetensors", tmp / "model.safetensors", fs::copy_options::overwrite_existing);
  auto eos_model = TargetModel::load(tmp.string());
  std::string plain_stop;
  const std::vector<int32_t> plain = plain_greedy(*eos_model, prompt, 40, false, pool, &plain_stop);
  EXPECT_EQ(plain_stop, "eos");
  EXPECT_EQ(plain.size(), k);
  const SpeculativeResult r = run(4, 40, forced([](int64_t, size_t) { return true; }), false, eos_model.get());
  EXPECT_EQ(r.tokens, plain);
  EXPECT_EQ(r.stop_reason, "eos");
  EXPECT_EQ(r.stats.rounds, 2);
  EXPECT_EQ(r.stats.accepted, 8);
  fs::remove_all(tmp);
}

TEST_F(ForcedFixture, ControlledAcceptanceFollowsP) {
  // p = 1: every draft accepted; p = 0: none; p = 0.6: in between; output always exact.
  for (double p : {1.0, 0.0, 0.6}) {
    const SpeculativeResult r = run(3, 41, controlled_acceptance(ref, p, model->vocab_size(), 3));
    EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + 41)) << p;
    if (p == 1.0) {
      EXPECT_EQ(r.stats.accepted, r.stats.drafted);
    }
    if (p == 0.0) {
      EXPECT_EQ(r.stats.accepted, 0);
    }
    if (p == 0.6) {
      EXPECT_GT(r.stats.accepted, 0);
      EXPECT_LT(r.stats.accepted, r.stats.drafted);
    }
  }
  EXPECT_DOUBLE_EQ(ideal_speedup(0.5, 1), 1.5);
  EXPECT_DOUBLE_EQ(ideal_speedup(1.0, 3), 4.0);
  EXPECT_DOUBLE_EQ(ideal_speedup(0.0, 3), 1.0);
}

TEST_F(ForcedFixture, ContextLimitStopsWherePlainDecodingStops) {
  for (int64_t extra : {1, 2, 9}) {
    TargetOptions to;
    to.max_context = static_cast<int64_t>(prompt.size()) + extra;
    auto limited = TargetModel::load((dir / "model").string(), to);
    std::string plain_stop;
    const std::vector<int32_t> plain = plain_greedy(*limited, prompt, 50, true, pool, &plain_stop);
    EXPECT_EQ(plain_stop, "context");
    for (int64_t gamma : {1, 4}) {
      const SpeculativeResult r = run(gamma, 50, forced([](int64_t, size_t) { return true; }), true, limited.get());
      EXPECT_EQ(r.tokens, plain) << "extra " << extra << " gamma " << gamma;
      EXPECT_EQ(r.stop_reason, "context");
    }
  }
}

TEST_F(ForcedFixture, GammaAboveTheRollbackReserveIsRejectedUpFront) {
  TargetCache cache = model->new_cache();
  SpeculativeOptions o;
  o.gamma.fixed = cache.options().rollback_reserve + 1;
  EXPECT_THROW(generate_speculative(*model, cache, drafter.get(), prompt, o, pool), Error);
  EXPECT_THROW(generate_speculative(*model, cache, nullptr, prompt, SpeculativeOptions{}, pool), Error);
}

// ---- speculative sampling is distribution-preserving ----

// Upper 1e-3 quantile of chi-square with df degrees of freedom (Wilson-Hilferty).
double chi2_critical(double df) {
  const double z = 3.0902;
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

struct SamplingCase {
  std::string golden;
  double temperature;
  int top_k;
  double top_p;
  bool forced;  // replace the drafter's first draft by the target's likeliest t2 (a point-mass q)
};

class SpecSamplingDistribution : public ::testing::TestWithParam<SamplingCase> {};

TEST_P(SpecSamplingDistribution, FirstTwoTokensFollowThePlainSamplingDistribution) {
  const SamplingCase& c = GetParam();
  const auto dir = golden_root() / c.golden;
  auto model = TargetModel::load((dir / "model").string());
  auto drafter = Drafter::load((dir / "drafter").string(), *model);
  std::vector<int32_t> prompt = golden_prompt(c.golden);
  prompt.resize(10);
  const int64_t V = model->vocab_size();
  SamplingParams params;
  params.temperature = c.temperature;
  params.top_k = c.top_k;
  params.top_p = c.top_p;
  ThreadPool pool(1);

  // The exact joint distribution plain sampling draws (t1, t2) from.
  std::map<std::pair<int32_t, int32_t>, double> exact;
  std::map<int32_t, std::pair<int32_t, double>> likeliest_t2;  // t1 -> (t2, p2)
  {
    TargetCache cache = model->new_cache();
    ForwardRequest last;
    const ForwardOutput out = model->forward(cache, prompt, last, pool);
    const TokenDistribution p1 =
        build_distribution({out.logits_row(0), static_cast<size_t>(V)}, {prompt, prompt.size()}, params).p;
    p1.for_each([&](int32_t t1, double q1) {
      std::vector<int32_t> hist = prompt;
      hist.push_back(t1);
      const ForwardOutput o2 = model->forward(cache, std::span<const int32_t>(&t1, 1), last, pool);
      const TokenDistribution p2 =
          build_distribution({o2.logits_row(0), static_cast<size_t>(V)}, {hist, prompt.size()}, params).p;
      p2.for_each([&](int32_t t2, double q2) {
        exact[{t1, t2}] += q1 * q2;
        auto& best = likeliest_t2[t1];
        if (q2 > best.second) best = {t2, q2};
      });
      cache.rollback(1);
    });
  }

  const int runs = 1200;
  std::map<std::pair<int32_t, int32_t>, int> seen;
  TargetCache cache = model->new_cache();
  int64_t accepted = 0;
  for (int s = 0; s < runs; ++s) {
    SpeculativeOptions o;
    o.max_tokens = 2;
    o.ignore_eos = true;
    if (c.forced)
      o.override_drafts = [&](const DraftRoundInfo& info, std::vector<int32_t>& drafts) {
        drafts.resize(1);
        drafts[0] = likeliest_t2.at(info.context.back()).first;
      };
    o.gamma.fixed = 2;
    o.sampling = params;
    o.sampling.seed = static_cast<uint64_t>(s) + 1000;
    const SpeculativeResult r = generate_speculative(*model, cache, drafter.get(), prompt, o, pool);
    ASSERT_EQ(r.tokens.size(), 2u);
    seen[{r.tokens[0], r.tokens[1]}] += 1;
    accepted += r.stats.accepted;
  }
  // Chi-square over bins of expected count >= 5, the rest pooled into one bin.
  double chi2 = 0.0, rest_expected = 0.0, rest_seen = 0.0;
  int bins = 0;
  for (const auto& [key, prob] : exact) {
    const double e = prob * runs;
    const auto it = seen.find(key);
    const double o = it == seen.end() ? 0.0 : it->second;
    if (e >= 5.0) {
      chi2 += (o - e) * (o - e) / e;
      ++bins;
    } else {
      rest_expected += e;
      rest_seen += o;
    }
  }
  for (const auto& [key, count] : seen)
    if (!exact.count(key)) rest_seen += count;  // impossible pairs land here and blow up chi2
  if (rest_expected > 0) {
    chi2 += (rest_seen - rest_expected) * (rest_seen - rest_expected) / rest_expected;
    ++bins;
  } else if (rest_seen > 0) {
    chi2 = INFINITY;
  }
  ASSERT_GE(bins, 2);
  EXPECT_LT(chi2, chi2_critical(bins - 1)) << bins << " bins, " << accepted << " drafts accepted";
  // The forced case must exercise the accept path, not only rejections.
  if (c.forced) {
    EXPECT_GT(accepted, runs / 10);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, SpecSamplingDistribution,
                         ::testing::Values(SamplingCase{"dense-bf16-hf", 1.0, 0, 0.9, false},
                                           SamplingCase{"dense-bf16-hf", 0.7, 8, 1.0, false},
                                           SamplingCase{"dense-densehead-bf16", 0.5, 0, 0.8, false},
                                           SamplingCase{"dense-bf16-hf", 0.8, 0, 1.0, true}),
                         [](const ::testing::TestParamInfo<SamplingCase>& info) {
                           return "case" + std::to_string(info.index);
                         });

// ---- load-time compatibility ----

TEST(SpecLoad, MismatchedDrafterAndTargetFailWithClearErrors) {
  // The 192-wide, window-6 target with the 128-wide, window-8 drafter of another case.
  auto model = TargetModel::load((golden_root() / "e4b-like-q2g32-window6" / "model").string());
  const auto other = golden_root() / "dense-bf16-hf" / "drafter";
  ASSERT_EQ(model->config().text.hidden_size, 192);
  try {
    Drafter::load(other.string(), *model);
    FAIL() << "expected an incompatibility error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("backbone_hidden_size"), std::string::npos) << msg;
    EXPECT_NE(msg.find("= 192"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sliding_window"), std::string::npos) << msg;
  }
  EXPECT_THROW(Drafter::load((golden_root() / "no-such-drafter").string(), *model), Error);
  EXPECT_THROW(parse_drafter_convention("hf"), Error);
  EXPECT_THROW(parse_gamma_choice("-1"), Error);
  EXPECT_THROW(parse_gamma_choice("3x"), Error);
  EXPECT_TRUE(parse_gamma_choice("auto").automatic);
  EXPECT_EQ(parse_gamma_choice("5").fixed, 5);
}

}  // namespace
}  // namespace specula
