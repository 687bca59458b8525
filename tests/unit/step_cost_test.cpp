// The batched step's cost model (engine/step_cost.h): the slope it learns from steps of different
// sizes, and the per-sequence share `--gamma auto` is fed.
#include <gtest/gtest.h>

#include "specula/engine/step_cost.h"

namespace specula {
namespace {

TEST(StepCost, NoSlopeUntilStepsDifferInSize) {
  StepCostModel m;
  EXPECT_EQ(m.marginal_row_ms(), 0.0);
  for (int i = 0; i < 20; ++i) m.record(4, 80.0);
  EXPECT_EQ(m.marginal_row_ms(), 0.0);
}

TEST(StepCost, LearnsTheSlopeOfALine) {
  StepCostModel m;
  for (int i = 0; i < 60; ++i) {
    const int64_t rows = 1 + i % 9;
    m.record(rows, 60.0 + 5.0 * static_cast<double>(rows));
  }
  EXPECT_NEAR(m.marginal_row_ms(), 5.0, 1e-6);
}

TEST(StepCost, SlopeIsClippedToTheMeanCostPerRow) {
  StepCostModel m;
  m.record(1, 1.0);
  m.record(10, 100.0);  // slope 11 > mean per row (101 / 11)
  EXPECT_LE(m.marginal_row_ms(), 101.0 / 11.0 + 1e-9);
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

}  // namespace
}  // namespace specula
