// The auto draft-length policy: it drafts when drafting pays, falls back to plain decoding (gamma
// 0) when it does not, and probes again after a run of plain rounds.
#include <gtest/gtest.h>

#include "specula/speculative/gamma_policy.h"
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
  EXPECT_LE(probes, 20);  // ... every 16 rounds, not every 8 (that would be ~35 probes)
}

// Verify costs are flat for the first rows and climb after (CPU kernels turn compute-bound): equal
// costs for 1 and 3 rows must not make 9 rows look free. The policy tries one width past the
// widest measured at a time.
TEST(SpecGammaPolicy, TriesOneWidthPastTheWidestMeasuredAtATime) {
  AutoGamma p(8);
  EXPECT_EQ(p.choose(), 0);
  p.record(0, 0, 0.0, 100.0);
  EXPECT_EQ(p.choose(), 2);
  p.record(2, 2, 2.0, 100.0);
  EXPECT_EQ(p.choose(), 3);  // the line through widths 1 and 3 is flat: wider would look better
  p.record(3, 3, 3.0, 100.0);
  EXPECT_EQ(p.choose(), 4);
}

// One verify three times as slow as usual (another process took the cores) barely moves its
// width's estimate, so the width is not priced out for good; a slowdown that lasts gets through.
TEST(SpecGammaPolicy, OneSlowVerifyBarelyMovesItsWidthsEstimate) {
  AutoGamma p(2);
  EXPECT_EQ(p.choose(), 0);
  p.record(0, 0, 0.0, 10.0);
  for (int i = 0; i < 5; ++i) p.record(2, 1, 0.4, 11.0);  // acceptance stays 1/2 (with the prior)
  const double before = p.expected_rate(2);
  p.record(2, 1, 0.4, 33.0);
  EXPECT_GE(p.expected_rate(2), 0.93 * before);  // 0.66 if the slow round counted in full
  for (int i = 0; i < 40; ++i) p.record(2, 1, 0.4, 33.0);
  EXPECT_LE(p.expected_rate(2), 0.4 * before);
}

// The opening plain round is the first step after the prefill and often the slowest of a run. It
// must not make plain decoding look dearer than verifying drafts that are never accepted: more
// rows never cost less, so a wider verify measured cheaper caps the narrower width's cost.
TEST(SpecGammaPolicy, ASlowOpeningRoundDoesNotKeepItDrafting) {
  AutoGamma p(4);
  EXPECT_EQ(p.choose(), 0);
  p.record(0, 0, 0.0, 140.0);
  int late_plain = 0;
  for (int i = 0; i < 120; ++i) {  // drafter 2 % of a step, 5 % more per extra verify row
    const int64_t g = p.choose();
    if (i >= 60 && g == 0) ++late_plain;
    p.record(g, 0, 2.0 * static_cast<double>(g), 100.0 + 5.0 * static_cast<double>(g));
  }
  // Plain once the acceptance estimate has fallen below ~2 % (its prior fades slowly), apart from
  // the probes; 0 when the 140 ms stood for plain decoding's cost.
  EXPECT_GE(late_plain, 50);
}

// The first measurement of a width can be a slow step (another process on the cores): the width
// then looks dear, and a policy that only measures what it picks would never pick it again. After
// a run of rounds at one gamma the policy tries one wider, and a faster measurement counts for
// more than a slower one, so the width comes back.
TEST(SpecGammaPolicy, AWidthPricedOutByOneSlowMeasurementIsMeasuredAgain) {
  AutoGamma p(3);
  bool slowed = false;
  int late_three = 0;
  for (int i = 0; i < 60; ++i) {
    const int64_t g = p.choose();
    double verify = 100.0 + 2.0 * static_cast<double>(g);  // drafts always accepted: gamma 3 is best
    if (g == 3 && !slowed) {
      verify *= 1.6;
      slowed = true;
    }
    if (i >= 40 && g == 3) ++late_three;
    p.record(g, g, 1.0 * static_cast<double>(g), verify);
  }
  EXPECT_TRUE(slowed);
  EXPECT_GE(late_three, 15);
}

TEST(SpecGammaPolicy, RejectsImpossibleRounds) {
  AutoGamma p(3);
  EXPECT_THROW(p.record(4, 0, 1.0, 1.0), Error);
  EXPECT_THROW(p.record(2, 3, 1.0, 1.0), Error);
  EXPECT_THROW(AutoGamma(-1), Error);
}

}  // namespace
}  // namespace specula
