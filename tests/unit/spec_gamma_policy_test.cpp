// The auto draft-length policy: it drafts when drafting pays, falls back to plain decoding (gamma
// 0) when it does not, and probes again after a run of plain rounds.
#include <gtest/gtest.h>

#include "specula/spec/gamma_policy.h"
#include "specula/util/error.h"

namespace specula {
namespace {

// Feeds `rounds` rounds of the chosen gamma with a fixed acceptance pattern and costs
// (draft step d ms, verify of w rows = v1 * (1 + slope * (w - 1)) ms); returns the last choice.
int64_t settle(AutoGamma& p, int rounds, double accept_fraction, double d, double v1, double slope) {
  int64_t g = 0;
  for (int i = 0; i < rounds; ++i) {
    g = p.choose();
    const int64_t a = static_cast<int64_t>(accept_fraction * static_cast<double>(g) + 0.5);
    p.record(g, a, d * static_cast<double>(g), v1 * (1.0 + slope * static_cast<double>(g)));
  }
  return p.choose();
}

TEST(SpecGammaPolicy, DraftsLongWhenAcceptanceIsHighAndDraftingIsCheap) {
  AutoGamma p(8);
  EXPECT_EQ(p.choose(), 0);  // nothing measured: one plain round measures the one-row cost
  p.record(0, 0, 0.0, 10.0);
  EXPECT_GE(p.choose(), 1);  // then drafting, to measure the drafter
  EXPECT_GE(settle(p, 40, 1.0, 0.05, 10.0, 0.05), 5);
  EXPECT_GT(p.acceptance(), 0.9);
}

TEST(SpecGammaPolicy, FallsBackToPlainDecodingWhenNothingIsAccepted) {
  AutoGamma p(8);
  int zeros = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t g = p.choose();
    if (g == 0) ++zeros;
    p.record(g, 0, 5.0 * static_cast<double>(g), 10.0 * (1.0 + 0.3 * static_cast<double>(g)));
  }
  EXPECT_GT(zeros, 30);
  EXPECT_LE(p.acceptance(), 0.2);  // the prior's one success over a few probing rounds
}

TEST(SpecGammaPolicy, ProbesAgainAfterARunOfPlainRounds) {
  AutoGamma p(4);
  bool probed = false;
  for (int i = 0; i < 60; ++i) {
    const int64_t g = p.choose();
    if (i > 20 && g == 1) probed = true;
    p.record(g, 0, 5.0 * static_cast<double>(g), 10.0 * (1.0 + 0.3 * static_cast<double>(g)));
  }
  EXPECT_TRUE(probed);
}

// Verify costs that grow steeply with the rows (compute-bound kernels, as on CPUs today): at low
// acceptance drafting loses, and the policy must learn that from the measured widths rather than
// assume cheap extra rows.
TEST(SpecGammaPolicy, SteepVerifyCostsAndLowAcceptanceMeanPlainDecoding) {
  AutoGamma p(8);
  EXPECT_EQ(settle(p, 30, 0.3, 0.2, 10.0, 0.7), 0);
}

TEST(SpecGammaPolicy, ProbesLessOftenWhileProbesFindNothing) {
  AutoGamma p(4);
  int probes = 0;
  for (int i = 0; i < 300; ++i) {
    const int64_t g = p.choose();
    if (i > 20 && g > 0) ++probes;
    p.record(g, 0, 5.0 * static_cast<double>(g), 10.0 * (1.0 + 0.3 * static_cast<double>(g)));
  }
  EXPECT_GE(probes, 3);   // it keeps probing ...
  EXPECT_LE(probes, 10);  // ... but not every 8 rounds (that would be ~35 probes)
}

TEST(SpecGammaPolicy, RejectsImpossibleRounds) {
  AutoGamma p(3);
  EXPECT_THROW(p.record(4, 0, 1.0, 1.0), Error);
  EXPECT_THROW(p.record(2, 3, 1.0, 1.0), Error);
  EXPECT_THROW(AutoGamma(-1), Error);
}

}  // namespace
}  // namespace specula
