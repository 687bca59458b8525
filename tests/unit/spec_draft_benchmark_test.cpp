// The bench's timing primitives on a tiny golden model: step costs are measured, positive and
// leave the context where it was; controlled acceptance runs the real speculative loop, follows p
// at its ends (0: nothing accepted, 1: everything), and refuses a reference that is not the
// target's own greedy output; its right drafts sit at the same positions whatever the gamma.
#include <algorithm>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "specula/model/generate.h"
#include "specula/model/target_benchmark.h"
#include "specula/speculative/controlled_acceptance.h"
#include "specula/speculative/draft_benchmark.h"
#include "specula/util/error.h"

namespace specula {
namespace {

const auto kDir = std::filesystem::path(SPECULA_TEST_DATA) / "goldens" / "dense-bf16-hf";

TEST(SpecDraftBenchmark, StepCostsKeepTheContext) {
  auto model = TargetModel::load((kDir / "model").string());
  auto drafter = Drafter::load((kDir / "drafter").string(), *model);
  ThreadPool pool(1);
  const std::vector<int32_t> prompt = bench_prompt(model->vocab_size(), 24, 1);
  ASSERT_EQ(prompt.size(), 24u);
  EXPECT_EQ(prompt[0], 2);
  EXPECT_EQ(bench_prompt(model->vocab_size(), 24, 1), prompt);  // deterministic

  TargetCache cache = model->new_cache();
  const GenerationTiming g = time_generation(*model, cache, prompt, 4, pool);
  EXPECT_EQ(g.tokens.size(), 5u);
  EXPECT_GT(g.prefill_tok_per_s, 0.0);
  EXPECT_GT(g.ttft_ms, 0.0);
  EXPECT_GT(g.decode_tok_per_s, 0.0);
  const int64_t offset = cache.offset();
  const StepCosts c = time_target_steps(*model, cache, g.tokens.back(), 4, 2, pool);
  EXPECT_EQ(cache.offset(), offset);
  EXPECT_GT(c.decode_ms, 0.0);
  for (int64_t w = 2; w <= 4; ++w) EXPECT_GT(c.verify_ratio(w), 0.0) << w;
  EXPECT_THROW(time_target_steps(*model, cache, 3, 1000, 1, pool), Error);  // beyond the rollback reserve

  ForwardRequest req;
  req.rows = OutputRows::Last;
  req.hidden = true;
  const ForwardOutput out = model->forward(cache, std::span<const int32_t>(&g.tokens.back(), 1), req, pool);
  const int64_t before_draft = cache.offset();
  EXPECT_GT(time_draft_step(*model, cache, *drafter, g.tokens.back(), out.hidden_row(0), 2, pool), 0.0);
  EXPECT_EQ(cache.offset(), before_draft);  // the target steps between the drafter's are rolled back
  EXPECT_THROW(time_draft_step(*model, cache, *drafter, 3, out.hidden_row(0), 0, pool), Error);
}

TEST(SpecDraftBenchmark, ControlledAcceptanceIsExactAndFollowsP) {
  auto model = TargetModel::load((kDir / "model").string());
  auto drafter = Drafter::load((kDir / "drafter").string(), *model);
  ThreadPool pool(1);
  const std::vector<int32_t> prompt = bench_prompt(model->vocab_size(), 12, 2);
  TargetCache cache = model->new_cache();
  GenerateOptions go;
  go.max_tokens = 16 + 4;
  go.ignore_eos = true;
  const std::vector<int32_t> reference = generate_greedy(*model, cache, prompt, go, pool).tokens;

  GammaChoice two;
  two.fixed = 2;
  const SpeculativeResult none =
      run_controlled_acceptance(*model, cache, *drafter, prompt, reference, 0.0, two, 16, 1, pool);
  EXPECT_GT(none.stats.drafted, 0);
  EXPECT_EQ(none.stats.accepted, 0);
  const SpeculativeResult all =
      run_controlled_acceptance(*model, cache, *drafter, prompt, reference, 1.0, two, 16, 1, pool);
  EXPECT_EQ(all.stats.accepted, all.stats.drafted);
  EXPECT_LT(all.stats.rounds, none.stats.rounds);
  GammaChoice automatic = parse_gamma_choice("auto");
  automatic.max_gamma = 4;
  EXPECT_EQ(
      run_controlled_acceptance(*model, cache, *drafter, prompt, reference, 0.7, automatic, 16, 1, pool).tokens.size(),
      16u);

  // A reference that is not the target's greedy output is caught: the run's output differs.
  std::vector<int32_t> wrong = reference;
  wrong[3] = (wrong[3] + 1) % static_cast<int32_t>(model->vocab_size());
  EXPECT_THROW(run_controlled_acceptance(*model, cache, *drafter, prompt, wrong, 0.5, two, 16, 1, pool), Error);
  // Too short for the tokens plus the gamma.
  const std::vector<int32_t> short_ref(reference.begin(), reference.begin() + 10);
  EXPECT_THROW(run_controlled_acceptance(*model, cache, *drafter, prompt, short_ref, 0.5, two, 16, 1, pool), Error);
}

// The drafts one round of `gamma` gets with `emitted` tokens emitted (the pending one included).
std::vector<int32_t> drafts_at(const DraftOverride& o, size_t emitted, int64_t gamma) {
  const std::vector<int32_t> context(3 + emitted, 5);  // a 3-token prompt, then the emitted tokens
  DraftRoundInfo info;
  info.context = context;
  info.prompt_length = 3;
  info.gamma = gamma;
  std::vector<int32_t> drafts;
  o(info, drafts);
  return drafts;
}

TEST(ControlledAcceptance, RightDraftsDependOnThePositionAlone) {
  std::vector<int32_t> reference(400);
  for (size_t i = 0; i < reference.size(); ++i) reference[i] = static_cast<int32_t>(10 + i % 50);
  const DraftOverride o = controlled_acceptance(reference, 0.6, 100, 9);
  // Position by position with gamma 1 ...
  std::vector<bool> right;
  for (size_t at = 0; at < reference.size(); ++at) {
    const std::vector<int32_t> d = drafts_at(o, at, 1);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_TRUE(d[0] == reference[at] || d[0] == (reference[at] + 1) % 100) << at;
    right.push_back(d[0] == reference[at]);
  }
  // ... and the same verdicts from rounds of other gammas starting anywhere, in any order.
  for (int64_t gamma : {4, 3, 7})
    for (size_t start = 0; start + 7 < reference.size(); start += 13) {
      const std::vector<int32_t> d = drafts_at(o, start, gamma);
      for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i] == reference[start + i], right[start + i]) << start + i;
    }
  // The share of right positions follows p; another seed draws other positions.
  const auto rights = static_cast<double>(std::count(right.begin(), right.end(), true));
  EXPECT_NEAR(rights / static_cast<double>(right.size()), 0.6, 0.08);
  const DraftOverride other = controlled_acceptance(reference, 0.6, 100, 10);
  size_t differ = 0;
  for (size_t at = 0; at < reference.size(); ++at) differ += (drafts_at(other, at, 1)[0] == reference[at]) != right[at];
  EXPECT_GT(differ, 50u);
  // Past the reference every draft is wrong.
  const std::vector<int32_t> beyond = drafts_at(o, reference.size() - 1, 3);
  EXPECT_EQ(beyond[1], 1);
  EXPECT_EQ(beyond[2], 1);
}

}  // namespace
}  // namespace specula
