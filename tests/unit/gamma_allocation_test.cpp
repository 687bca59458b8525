// `--gamma auto` under load (engine/gamma_allocation.h): the gammas of the sequences sharing a
// step, from their acceptance and the step's cost by row count.
#include <gtest/gtest.h>

#include <vector>

#include "specula/engine/gamma_allocation.h"

namespace specula {
namespace {

// A CPU-like curve: flat to 4 rows (reading the weights), then ~16 ms a row (multiplying).
StepCostModel knee_at_four(int64_t widest = 16) {
  StepCostModel m;
  for (int i = 0; i < 3; ++i)
    for (int64_t rows = 1; rows <= widest; ++rows)
      m.record(rows, rows <= 4 ? 60.0 + static_cast<double>(rows) : 64.0 + 16.0 * static_cast<double>(rows - 4));
  return m;
}

std::vector<GammaCandidate> streams(int n, double acceptance, int64_t max_gamma = 8) {
  return std::vector<GammaCandidate>(static_cast<size_t>(n), GammaCandidate{acceptance, max_gamma, true});
}

int64_t total(const std::vector<int64_t>& g) {
  int64_t t = 0;
  for (int64_t x : g) t += x;
  return t;
}

TEST(GammaAllocation, ExpectedTokensOfARound) {
  EXPECT_DOUBLE_EQ(expected_round_tokens(0.7, 0), 1.0);
  EXPECT_NEAR(expected_round_tokens(0.7, 2), 1.0 + 0.7 + 0.49, 1e-12);
  EXPECT_NEAR(expected_round_tokens(1.0, 3), 4.0, 1e-6);
  EXPECT_DOUBLE_EQ(expected_round_tokens(0.0, 5), 1.0);
}

TEST(GammaAllocation, TwoStreamsDraftWhileRowsAreNearlyFree) {
  StepLoad load;
  load.draft_step_ms = 3.0;
  const auto g = allocate_gammas(streams(2, 0.7), load, knee_at_four());
  EXPECT_EQ(g, (std::vector<int64_t>{1, 1})) << "4 rows cost a 2-row step; a 5th costs 16 ms";
}

TEST(GammaAllocation, EightStreamsDoNotDraftOnceRowsCostTheirMultiply) {
  StepLoad load;
  load.draft_step_ms = 3.0;
  EXPECT_EQ(total(allocate_gammas(streams(8, 0.7), load, knee_at_four())), 0);
  EXPECT_EQ(total(allocate_gammas(streams(8, 0.95), load, knee_at_four())), 0)
      << "a 128 ms step of 8 tokens: a row costs 16 ms, more than a draft's expected share";
}

TEST(GammaAllocation, TheLikeliestDraftsGetTheFreeRows) {
  StepLoad load;
  load.draft_step_ms = 1.0;
  std::vector<GammaCandidate> c = {{0.2, 8, true}, {0.9, 8, true}, {0.2, 8, true}};
  const auto g = allocate_gammas(c, load, knee_at_four());
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[1], 1) << "the one free row goes to the stream that keeps its drafts";
  EXPECT_EQ(g[2], 0);
}

TEST(GammaAllocation, AFlatCurveLetsEveryStreamDraftDeep) {
  StepCostModel flat;
  for (int i = 0; i < 3; ++i)
    for (int64_t rows = 1; rows <= 40; ++rows) flat.record(rows, 60.0);
  StepLoad load;
  load.draft_step_ms = 2.0;
  const auto g = allocate_gammas(streams(4, 0.8, 4), load, flat);
  EXPECT_EQ(g, (std::vector<int64_t>{4, 4, 4, 4}))
      << "a sixth draft position pays only when all four draft it (one drafter call serves them)";
}

TEST(GammaAllocation, TheOtherSequencesRowsCount) {
  StepLoad load;
  load.draft_step_ms = 3.0;
  load.other_rows = 2;  // e.g. a fixed-gamma sequence's verify
  load.other_tokens = 1.7;
  load.other_draft_steps = 1;
  const auto g = allocate_gammas(streams(1, 0.7), load, knee_at_four());
  EXPECT_EQ(g, (std::vector<int64_t>{1})) << "rows 3 and 4 are free, the drafter call is already paid";
  load.other_rows = 4;  // four plain sequences: a fifth row costs 16 ms
  load.other_tokens = 4.0;
  load.other_draft_steps = 0;
  EXPECT_EQ(allocate_gammas(streams(1, 0.7), load, knee_at_four()), (std::vector<int64_t>{0}));
}

TEST(GammaAllocation, UnknownWidthsAreNotChosen) {
  StepCostModel two;
  two.record(2, 60.0);  // only 2-row steps measured: 3 rows is the one width past
  StepLoad load;
  load.draft_step_ms = 1.0;
  const auto g = allocate_gammas(streams(2, 0.9), load, two);
  EXPECT_EQ(total(g), 1) << "one row past the widest measured is tried, not more";
  EXPECT_EQ(allocate_gammas(streams(2, 0.9), load, StepCostModel{}), (std::vector<int64_t>{0, 0}))
      << "nothing measured: plain rows first";
}

TEST(GammaAllocation, ADrafterCallThatCostsMoreThanItGainsIsNotMade) {
  StepLoad load;
  load.draft_step_ms = 80.0;  // a drafter as dear as the target step
  EXPECT_EQ(total(allocate_gammas(streams(2, 0.7), load, knee_at_four())), 0);
  std::vector<GammaCandidate> lookup = {{0.7, 8, false}, {0.7, 8, false}};
  EXPECT_EQ(allocate_gammas(lookup, load, knee_at_four()), (std::vector<int64_t>{1, 1}))
      << "prompt lookup proposes for free";
}

TEST(GammaAllocation, AGainWithinTheNoiseMarginIsNotTaken) {
  auto curve = [](double three_rows_ms) {
    StepCostModel m;
    m.record(2, 100.0);
    m.record(3, three_rows_ms);
    return m;
  };
  StepLoad beside_one_plain;  // another sequence decodes plainly; the drafter costs nothing here
  beside_one_plain.other_rows = 1;
  beside_one_plain.other_tokens = 1.0;
  // Two plain rows: 2 tokens per 100 ms. One draft at acceptance 0.5: 2.5 tokens per step of 3 rows.
  EXPECT_EQ(total(allocate_gammas(streams(1, 0.5, 1), beside_one_plain, curve(121.0))), 0) << "+3 %: within the margin";
  EXPECT_EQ(total(allocate_gammas(streams(1, 0.5, 1), beside_one_plain, curve(115.0))), 1) << "+8.7 %";
}

}  // namespace
}  // namespace specula
