// The constraint's token mask in the logits pipeline: greedy and sampling only ever choose allowed
// tokens, the allowed tokens keep their relative probabilities, and a mask of the wrong size is an
// error.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "error_of.h"
#include "specula/sample/logits_pipeline.h"
#include "specula/sample/sampler.h"

namespace specula {
namespace {

std::vector<uint64_t> mask_of(size_t vocab, std::initializer_list<int32_t> allowed) {
  std::vector<uint64_t> m((vocab + 63) / 64, 0);
  for (const int32_t t : allowed) m[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
  return m;
}

TEST(SampleMask, GreedyTakesTheBestAllowedToken) {
  std::vector<float> logits(130, 0.0f);
  logits[5] = 9.0f;
  logits[70] = 3.0f;
  logits[129] = 4.0f;
  SamplingParams p;
  p.temperature = 0.0;
  const std::vector<int32_t> history{2};
  Rng rng(1, 0);
  EXPECT_EQ(sample_token(logits, {history, 1}, p, rng).id, 5);
  EXPECT_EQ(sample_token(logits, {history, 1}, p, rng, mask_of(130, {70, 129})).id, 129);
  EXPECT_EQ(sample_token(logits, {history, 1}, p, rng, mask_of(130, {70})).id, 70);
}

TEST(SampleMask, SamplingRenormalizesOverTheAllowedTokens) {
  std::vector<float> logits(100, 0.0f);
  logits[3] = std::log(3.0f);
  logits[4] = 0.0f;
  SamplingParams p;
  p.temperature = 1.0;
  const std::vector<int32_t> history{2};
  const TokenDistribution d = build_distribution(logits, {history, 1}, p, mask_of(100, {3, 4})).p;
  EXPECT_NEAR(d.prob(3), 0.75, 1e-6);
  EXPECT_NEAR(d.prob(4), 0.25, 1e-6);
  EXPECT_EQ(d.prob(0), 0.0);
}

TEST(SampleMask, WrongMaskSizeIsAnError) {
  std::vector<float> logits(100, 0.0f);
  SamplingParams p;
  const std::vector<int32_t> history{2};
  EXPECT_EQ(test::error_of([&] {
              build_distribution(logits, {history, 1}, p, mask_of(200, {1}));
            }),
            "sampling: the allowed-token mask has 4 words, the vocabulary of 100 needs 2");
}

}  // namespace
}  // namespace specula
