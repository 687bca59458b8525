// Greedy speculative decoding against the float64 goldens (`spec` and `budget_sweep_gamma3` of
// tests/data/goldens/*/expected.json, EOS ignored): for every case, both drafter conventions and
// gamma 1, 2, 3, 5 — the 24 tokens, drafted, accepted, target_calls and every round's drafts and
// accepted count; and for gamma 3 (default convention) the counting rules at token budgets 1..24,
// where the budget ends inside a round.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "spec_golden_util.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"

namespace specula {
namespace {

using spec_test::golden_case_names;
using spec_test::golden_root;

struct Loaded {
  nlohmann::json expected;
  std::vector<int32_t> prompt;
  std::unique_ptr<TargetModel> model;
};

Loaded load_case(const std::string& name) {
  const auto dir = golden_root() / name;
  Loaded l;
  l.expected = read_json_file((dir / "expected.json").string());
  l.prompt = l.expected.at("prompt").get<std::vector<int32_t>>();
  l.model = TargetModel::load((dir / "model").string());
  return l;
}

class SpecGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(SpecGolden, RoundsAndCountsForEveryGammaAndConvention) {
  Loaded l = load_case(GetParam());
  ThreadPool pool(1);
  TargetCache cache = l.model->new_cache();
  const auto greedy = l.expected.at("greedy").get<std::vector<int32_t>>();
  for (DrafterConvention conv : {DrafterConvention::Ollama, DrafterConvention::MlxBun}) {
    auto drafter = Drafter::load((golden_root() / GetParam() / "drafter").string(), *l.model, conv);
    const nlohmann::json& by_gamma = l.expected.at("spec").at(drafter_convention_name(conv));
    for (const auto& [gamma_key, want] : by_gamma.items()) {
      SCOPED_TRACE(std::string(drafter_convention_name(conv)) + " gamma " + gamma_key);
      SpeculativeOptions o;
      o.max_tokens = static_cast<int64_t>(want.at("tokens").size());
      o.ignore_eos = true;
      o.gamma.fixed = std::stoll(gamma_key);
      o.trace = true;
      const SpeculativeResult r = generate_speculative(*l.model, cache, drafter.get(), l.prompt, o, pool);
      EXPECT_EQ(r.tokens, want.at("tokens").get<std::vector<int32_t>>());
      EXPECT_EQ(r.tokens, greedy);
      EXPECT_EQ(r.stats.drafted, want.at("drafted").get<int64_t>());
      EXPECT_EQ(r.stats.accepted, want.at("accepted").get<int64_t>());
      EXPECT_EQ(r.stats.target_calls, want.at("target_calls").get<int64_t>());
      const auto& rounds = want.at("rounds");
      ASSERT_EQ(r.rounds.size(), rounds.size());
      int tolerated = 0;
      for (size_t i = 0; i < rounds.size(); ++i) {
        const auto want_drafts = rounds[i].at("drafts").get<std::vector<int32_t>>();
        const int64_t want_accepted = rounds[i].at("accepted").get<int64_t>();
        EXPECT_EQ(r.rounds[i].accepted, want_accepted) << "round " << i;
        ASSERT_EQ(r.rounds[i].drafts.size(), want_drafts.size()) << "round " << i;
        size_t m = 0;
        while (m < want_drafts.size() && r.rounds[i].drafts[m] == want_drafts[m]) ++m;
        if (m == want_drafts.size()) continue;
        // The drafter chain amplifies rounding: on the random-weight drafters a late step can sit
        // on a knife-edge that a 1e-5 relative change of the round's input hidden flips (moe-f32-hf,
        // gamma 5, round 14, step 4: the f64 reference and f32 differ there). Such a late draft
        // after the round's first rejection cannot change what is verified or emitted; tolerate
        // one per run and require exactness everywhere else (kveq-q3g32-mlx, round 2, draft 1
        // flipped when the attention's q.k sum order changed by an f32 rounding).
        const bool harmless = static_cast<int64_t>(m) > want_accepted;
        EXPECT_TRUE(harmless) << "round " << i << " draft " << m << ": got " << r.rounds[i].drafts[m] << ", want "
                              << want_drafts[m];
        ++tolerated;
      }
      EXPECT_LE(tolerated, 1) << "late-step draft differences";
    }
  }
}

TEST_P(SpecGolden, BudgetSweepGamma3) {
  Loaded l = load_case(GetParam());
  ThreadPool pool(1);
  TargetCache cache = l.model->new_cache();
  auto drafter = Drafter::load((golden_root() / GetParam() / "drafter").string(), *l.model);
  const auto& sweep = l.expected.at("budget_sweep_gamma3");
  ASSERT_EQ(sweep.size(), 24u);
  for (const auto& want : sweep) {
    const int64_t budget = want.at("max_tokens").get<int64_t>();
    SCOPED_TRACE("max_tokens " + std::to_string(budget));
    SpeculativeOptions o;
    o.max_tokens = budget;
    o.ignore_eos = true;
    o.gamma.fixed = 3;
    const SpeculativeResult r = generate_speculative(*l.model, cache, drafter.get(), l.prompt, o, pool);
    EXPECT_EQ(r.tokens, want.at("tokens").get<std::vector<int32_t>>());
    EXPECT_EQ(r.stats.drafted, want.at("drafted").get<int64_t>());
    EXPECT_EQ(r.stats.accepted, want.at("accepted").get<int64_t>());
    EXPECT_EQ(r.stats.target_calls, want.at("target_calls").get<int64_t>());
    EXPECT_EQ(r.stop_reason, "max_tokens");
  }
}

INSTANTIATE_TEST_SUITE_P(AllCases, SpecGolden, ::testing::ValuesIn(golden_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return spec_test::param_name(info.param);
                         });

}  // namespace
}  // namespace specula

namespace specula {
namespace {

// `specula run --draft DIR --gamma 3 --json --trace` reports the golden's statistics and rounds,
// each with its draft and verify times.
TEST(SpecCli, RunWithDrafterReportsStatsAndRounds) {
  const auto dir = golden_root() / "dense-bf16-hf";
  const nlohmann::json expected = read_json_file((dir / "expected.json").string());
  std::string tokens;
  for (const auto& t : expected.at("prompt")) {
    if (!tokens.empty()) tokens += ',';
    tokens += std::to_string(t.get<int>());
  }
  const std::string cmd = std::string(SPECULA_BINARY) + " run --model " + (dir / "model").string() + " --draft " +
                          (dir / "drafter").string() + " --gamma 3 --max-tokens 24 --ignore-eos --json --trace " +
                          "--threads 1 --tokens " + tokens;
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) text.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << cmd;
  const nlohmann::json doc = nlohmann::json::parse(text);
  const nlohmann::json& want = expected.at("spec").at("ollama").at("3");
  EXPECT_EQ(doc.at("tokens"), want.at("tokens"));
  const nlohmann::json& st = doc.at("stats");
  EXPECT_EQ(st.at("drafted"), want.at("drafted"));
  EXPECT_EQ(st.at("accepted"), want.at("accepted"));
  EXPECT_EQ(st.at("target_calls"), want.at("target_calls"));
  EXPECT_EQ(st.at("gamma_histogram").at("3"), want.at("rounds").size());
  EXPECT_NEAR(st.at("acceptance_rate").get<double>(),
              want.at("accepted").get<double>() / want.at("drafted").get<double>(), 1e-12);
  // Each round as the golden has it, plus its measured times.
  const nlohmann::json& rounds = doc.at("rounds");
  ASSERT_EQ(rounds.size(), want.at("rounds").size());
  for (size_t i = 0; i < rounds.size(); ++i) {
    EXPECT_EQ(rounds[i].at("drafts"), want.at("rounds")[i].at("drafts")) << "round " << i;
    EXPECT_EQ(rounds[i].at("accepted"), want.at("rounds")[i].at("accepted")) << "round " << i;
    EXPECT_GT(rounds[i].at("draft_ms").get<double>(), 0.0) << "round " << i;
    EXPECT_GT(rounds[i].at("verify_ms").get<double>(), 0.0) << "round " << i;
  }
}

}  // namespace
}  // namespace specula
