// The batched step's cost model (engine/step_cost.h): a cost per row count, trusted while fresh,
// interpolated between fresh widths and extrapolated one row past the widest.
#include <gtest/gtest.h>

#include "specula/engine/step_cost.h"

namespace specula {
namespace {

TEST(StepCost, NothingIsKnownBeforeAStep) {
  StepCostModel m;
  EXPECT_LT(m.ms(1), 0.0);
  EXPECT_LT(m.ms(4), 0.0);
}

TEST(StepCost, OneWidthIsItsOwnCostBelowAndOneRowPast) {
  StepCostModel m;
  m.record(4, 60.0);
  EXPECT_EQ(m.ms(4), 60.0);
  EXPECT_EQ(m.ms(1), 60.0) << "fewer rows never cost more";
  EXPECT_EQ(m.ms(5), 60.0) << "one row past: tried once at the widest width's cost";
  EXPECT_LT(m.ms(6), 0.0) << "two rows past: unknown";
}

TEST(StepCost, FollowsAKneeThatNoLineFits) {
  StepCostModel m;
  const double knee[] = {0, 60, 61, 62, 64, 83, 98, 110, 128};  // flat to 4 rows, then ~16 ms a row
  for (int i = 0; i < 40; ++i)
    for (int rows = 1; rows <= 8; ++rows) m.record(rows, knee[rows]);
  for (int rows = 1; rows <= 8; ++rows) EXPECT_NEAR(m.ms(rows), knee[rows], 1e-9) << rows;
  EXPECT_NEAR(m.ms(9), 146.0, 1e-9) << "one past: the last slope (18 ms a row) added";
  EXPECT_LT(m.ms(10), 0.0);
}

TEST(StepCost, BetweenFreshWidthsTheCheapestConvexCurve) {
  StepCostModel m;
  m.record(1, 60.0);
  m.record(2, 61.0);
  m.record(8, 140.0);
  m.record(9, 150.0);
  EXPECT_NEAR(m.ms(3), 90.0, 1e-9) << "the 8-9 segment (10 ms a row) extended down";
  EXPECT_NEAR(m.ms(7), 130.0, 1e-9);
  StepCostModel flat_then_knee;
  flat_then_knee.record(1, 60.0);
  flat_then_knee.record(2, 61.0);
  flat_then_knee.record(8, 140.0);
  EXPECT_NEAR(flat_then_knee.ms(5), 64.0, 1e-9) << "nothing above 8: the 1-2 segment extended up";
  EXPECT_NEAR(flat_then_knee.ms(9), 140.0 + 79.0 / 6.0, 1e-9) << "one past: the slope from 2 to 8";
}

TEST(StepCost, BelowTheNarrowestFreshWidthItsSegmentExtendedDown) {
  StepCostModel m;
  m.record(8, 108.0);
  m.record(9, 120.0);
  EXPECT_NEAR(m.ms(4), 60.0, 1e-9);
  EXPECT_GT(m.ms(1), 0.0) << "never free";
}

TEST(StepCost, AFasterStepMovesTheEstimateMoreThanASlowerOne) {
  StepCostModel down, up;
  down.record(3, 100.0);
  down.record(3, 50.0);
  up.record(3, 100.0);
  up.record(3, 150.0);
  EXPECT_NEAR(down.ms(3), 70.0, 1e-9);
  EXPECT_NEAR(up.ms(3), 115.0, 1e-9);
  StepCostModel spike;
  spike.record(3, 100.0);
  spike.record(3, 10000.0);  // another process took the cores for one step
  EXPECT_NEAR(spike.ms(3), 115.0, 1e-9) << "clipped to 1.5x the estimate before averaging";
}

TEST(StepCost, MoreRowsNeverCostLessThanFewer) {
  StepCostModel m;
  m.record(2, 90.0);  // a slow first step
  m.record(4, 60.0);
  EXPECT_EQ(m.ms(2), 60.0);
  EXPECT_EQ(m.ms(3), 60.0);
}

TEST(StepCost, AWidthNotMeasuredForAWhileIsTriedAgain) {
  StepCostModel m;
  m.record(9, 150.0);  // one try past the usual 8 rows, found dear
  for (int i = 0; i < StepCostModel::kFreshSteps - 1; ++i) m.record(8, 128.0);
  EXPECT_NEAR(m.ms(9), 150.0, 1e-9);
  m.record(8, 128.0);
  EXPECT_EQ(m.ms(9), 128.0) << "stale: one row past the widest fresh width again";
}

TEST(StepCost, IgnoresStepsItCannotUse) {
  StepCostModel m;
  m.record(0, 10.0);
  m.record(-3, 10.0);
  m.record(2, -1.0);
  m.record(1 << 20, 10.0);
  EXPECT_LT(m.ms(1), 0.0);
}

}  // namespace
}  // namespace specula
