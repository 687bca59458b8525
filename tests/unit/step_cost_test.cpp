// The batched step's cost model (engine/step_cost.h): the slope it learns from steps of different
// sizes, and the per-sequence share `--gamma auto` is fed.
#include <gtest/gtest.h>

#include "specula/engine/step_cost.h"

namespace specula {
namespace {

TEST(StepCost, EveryRowCostsItsShareUntilStepsDifferInSize) {
  StepCostModel m;
  EXPECT_EQ(m.marginal_row_ms(), 0.0);
  for (int i = 0; i < 20; ++i) m.record(4, 80.0);
  EXPECT_NEAR(m.marginal_row_ms(), 20.0, 1e-9);
}

TEST(StepCost, LearnsTheSlopeOfALine) {
  StepCostModel m;
  for (int i = 0; i < 60; ++i) {
    const int64_t rows = 1 + i % 9;
    m.record(rows, 60.0 + 5.0 * static_cast<double>(rows));
  }
  EXPECT_NEAR(m.marginal_row_ms(), 5.0, 1e-6);
}

TEST(StepCost, TheLastSlopeReadIsKeptWhileStepsAreOneSize) {
  StepCostModel m;
  for (int i = 0; i < 40; ++i) m.record(1 + i % 8, 60.0 + 2.0 * (1 + i % 8));
  EXPECT_NEAR(m.marginal_row_ms(), 2.0, 1e-6);
  for (int i = 0; i < 200; ++i) m.record(2, 64.0);  // then only 2-row steps: no new slope to read
  EXPECT_NEAR(m.marginal_row_ms(), 2.0, 0.5);
  EXPECT_FALSE(m.compute_bound());
}

TEST(StepCost, SlopeIsClippedToTheMeanCostPerRow) {
  StepCostModel m;
  m.record(1, 1.0);
  m.record(10, 100.0);  // slope 11, above the ~9.2 ms a row costs on average
  EXPECT_GT(m.marginal_row_ms(), 9.0);
  EXPECT_LT(m.marginal_row_ms(), 9.5);
  StepCostModel falling;
  falling.record(1, 100.0);
  falling.record(10, 10.0);
  EXPECT_EQ(falling.marginal_row_ms(), 0.0);
}

TEST(StepCost, AloneTheShareIsTheStepUnderLoadTheFixedPartIsSplit) {
  StepCostModel flat;
  for (int i = 0; i < 30; ++i) flat.record(1 + i % 8, 70.0);  // memory-bound: rows are free
  EXPECT_EQ(flat.share(70.0, 5, 1, 5), 70.0);
  EXPECT_NEAR(flat.share(70.0, 8, 4, 1), 17.5, 1e-9);
  EXPECT_NEAR(flat.share(70.0, 8, 4, 5), 17.5, 1e-9);  // a wider verify costs nothing more

  StepCostModel steep;
  for (int i = 0; i < 60; ++i) steep.record(4 + i % 20, 10.0 * (4 + i % 20));  // compute-bound
  const double one = steep.share(200.0, 20, 8, 1);
  const double five = steep.share(200.0, 20, 8, 5);
  EXPECT_NEAR(five - one, 40.0, 1e-6);  // every extra row costs its multiply
  EXPECT_NEAR(steep.share(200.0, 20, 4, 5) * 4, 200.0, 1e-6) << "four sequences of 5 rows: the shares add up";
}

TEST(StepCost, ComputeBoundWhenAnExtraRowCostsHalfTheMeanOrMore) {
  StepCostModel none;
  EXPECT_FALSE(none.compute_bound());
  StepCostModel flat;
  for (int i = 0; i < 30; ++i) flat.record(1 + i % 8, 70.0 + 1.0 * (1 + i % 8));
  EXPECT_FALSE(flat.compute_bound()) << "1 ms per row on a 70 ms step: memory-bound";
  StepCostModel steep;
  for (int i = 0; i < 30; ++i) steep.record(4 + i % 8, 20.0 + 20.0 * (4 + i % 8));
  EXPECT_TRUE(steep.compute_bound());
  StepCostModel one_size;
  for (int i = 0; i < 30; ++i) one_size.record(8, 200.0);
  EXPECT_TRUE(one_size.compute_bound()) << "no slope to read: every row is assumed to cost its share";
}

}  // namespace
}  // namespace specula
