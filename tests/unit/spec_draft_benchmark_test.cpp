// The draft-bench measurements run end to end on a tiny golden model: every cost is measured and
// positive, and controlled acceptance keeps the output exact while acceptance follows p.
#include <filesystem>

#include <gtest/gtest.h>

#include "specula/spec/draft_benchmark.h"
#include "specula/util/error.h"

namespace specula {
namespace {

TEST(SpecDraftBenchmark, CostsAndControlledAcceptanceOnATinyModel) {
  const auto dir = std::filesystem::path(SPECULA_TEST_DATA) / "goldens" / "dense-bf16-hf";
  auto model = TargetModel::load((dir / "model").string());
  auto drafter = Drafter::load((dir / "drafter").string(), *model);
  ThreadPool pool(1);
  DraftBenchOptions o;
  o.prompt_tokens = 24;
  o.repeats = 3;
  o.max_width = 4;
  o.generate_tokens = 16;
  o.acceptance = {0.0, 1.0};
  o.gammas = {"2", "auto"};
  const DraftCosts c = bench_draft_costs(*model, *drafter, o, pool);
  EXPECT_GT(c.decode_ms, 0.0);
  EXPECT_GT(c.draft_step_ms, 0.0);
  for (int64_t w = 2; w <= 4; ++w) EXPECT_GT(c.verify_relative(w), 0.0) << w;
  const auto runs = bench_controlled_acceptance(*model, *drafter, o, pool);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].accepted, 0);                  // p = 0, gamma 2
  EXPECT_EQ(runs[2].accepted, runs[2].drafted);    // p = 1, gamma 2
  EXPECT_GT(runs[2].drafted, 0);
  EXPECT_DOUBLE_EQ(runs[2].ideal_speedup, 3.0);
  o.max_width = 1000;
  EXPECT_THROW(bench_draft_costs(*model, *drafter, o, pool), Error);
}

}  // namespace
}  // namespace specula
