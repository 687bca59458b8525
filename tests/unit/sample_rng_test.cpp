// Rng: pinned output (the same on every machine), seeds and streams, state save/restore, and the
// documented uniform construction.
#include "specula/sample/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "specula/util/error.h"

namespace specula {
namespace {

std::vector<uint64_t> take(Rng& rng, int n) {
  std::vector<uint64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(rng.next_u64());
  return v;
}

TEST(SampleRng, MatchesXoshiro256StarStarReferenceFromState1234) {
  // The published xoshiro256** outputs for the state {1, 2, 3, 4}.
  Rng rng;
  rng.set_state({{1, 2, 3, 4}});
  EXPECT_EQ(take(rng, 5),
            (std::vector<uint64_t>{11520ull, 0ull, 1509978240ull, 1215971899390074240ull, 1216172134540287360ull}));
}

TEST(SampleRng, SeedingIsPinned) {
  // Computed independently (splitmix64 expansion of seed ^ splitmix64(stream), then xoshiro256**).
  Rng a(0);
  EXPECT_EQ(take(a, 3), (std::vector<uint64_t>{0xfb5405f7bd79c540ull, 0x780c98e26cea5883ull, 0x2a146e0980febc66ull}));
  Rng b(42);
  EXPECT_EQ(take(b, 3), (std::vector<uint64_t>{0x1ff785474f113b15ull, 0x4b7867ceff5d8325ull, 0x90ca7a95a9909966ull}));
  Rng c(42, 1);
  EXPECT_EQ(take(c, 3), (std::vector<uint64_t>{0x584870a53e6ddcdfull, 0x24862b58ab088c44ull, 0xb77af7ea4c59709eull}));
}

TEST(SampleRng, SameSeedSameSequenceDifferentSeedOrStreamDiffers) {
  Rng a(7), b(7), c(8), d(7, 1);
  const auto va = take(a, 100);
  EXPECT_EQ(va, take(b, 100));
  EXPECT_NE(va, take(c, 100));
  EXPECT_NE(va, take(d, 100));
}

TEST(SampleRng, UniformIsTop53BitsTimes2PowMinus53) {
  Rng a(12345), b(12345);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t bits = a.next_u64();
    const double u = b.uniform();
    EXPECT_EQ(u, static_cast<double>(bits >> 11) * 0x1.0p-53);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  Rng c(12345);
  EXPECT_DOUBLE_EQ(c.uniform(), 0.231231261015598);
  EXPECT_DOUBLE_EQ(c.uniform(), 0.584931684719365);
}

TEST(SampleRng, UniformMeanAndSpread) {
  Rng rng(99);
  const int n = 100000;
  double sum = 0.0;
  int low = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    sum += u;
    low += u < 0.25;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);           // sd of the mean ~ 0.0009
  EXPECT_NEAR(low / double(n), 0.25, 0.006);  // sd ~ 0.0014
}

TEST(SampleRng, StateSaveRestoreReplays) {
  Rng rng(3);
  take(rng, 10);
  const RngState saved = rng.state();
  const auto first = take(rng, 20);
  rng.set_state(saved);
  EXPECT_EQ(take(rng, 20), first);
  Rng other(999);
  other.set_state(saved);
  EXPECT_EQ(take(other, 20), first);
}

TEST(SampleRng, RejectsAllZeroState) {
  Rng rng(1);
  EXPECT_THROW(rng.set_state(RngState{}), Error);
}

}  // namespace
}  // namespace specula
