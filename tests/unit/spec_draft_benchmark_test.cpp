// The bench's timing primitives on a tiny golden model: step costs are measured, positive and
// leave the context where it was; controlled acceptance runs the real speculative loop, follows p
// at its ends (0: nothing accepted, 1: everything), and refuses a reference that is not the
// target's own greedy output.
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "specula/model/generate.h"
#include "specula/model/target_benchmark.h"
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

}  // namespace
}  // namespace specula
