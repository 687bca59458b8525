// The constraint's token mask in the logits pipeline: greedy and sampling only ever choose allowed
// tokens, the allowed tokens keep their relative probabilities, and a mask of the wrong size is an
// error.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "error_of.h"
#include "specula/sample/logits_pipeline.h"
#include "specula/sample/sampler.h"
#include "specula/sample/speculative_sampling.h"

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

// Pearson's statistic of `counts` against the probabilities of `p` over `support`; a draw outside
// the support fails the test.
double chi_square(const std::map<int32_t, int>& counts, const TokenDistribution& p, const std::vector<int32_t>& support,
                  int draws) {
  double stat = 0.0;
  for (const auto& [token, n] : counts)
    if (std::find(support.begin(), support.end(), token) == support.end()) ADD_FAILURE() << "drew token " << token;
  for (const int32_t t : support) {
    const double expected = p.prob(t) * draws;
    const auto it = counts.find(t);
    const double observed = it == counts.end() ? 0.0 : it->second;
    stat += (observed - expected) * (observed - expected) / expected;
  }
  return stat;
}

// Draws under a mask follow the target's distribution renormalized over the allowed tokens, when
// sampled directly and when they come out of speculative sampling (a masked drafter proposes from
// its own q over allowed candidates; acceptance and the residual restore p).
TEST(SampleMask, DrawsFollowTheRenormalizedMaskedDistributionPlainAndSpeculative) {
  constexpr size_t kVocab = 130;
  std::vector<float> logits(kVocab);
  for (size_t i = 0; i < kVocab; ++i) logits[i] = static_cast<float>(2.0 * std::sin(static_cast<double>(i)));
  const std::vector<int32_t> allowed{3, 17, 64, 70, 129};
  const std::vector<uint64_t> mask = mask_of(kVocab, {3, 17, 64, 70, 129});
  SamplingParams params;
  params.temperature = 1.0;
  const std::vector<int32_t> history{2};
  const TokenDistribution p = build_distribution(logits, {history, 1}, params, mask).p;
  // The drafter's candidates as the constrained drafting step leaves them: a disallowed one at -inf.
  const std::vector<int32_t> ids{3, 5, 17, 64, 70, 129};
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const std::vector<float> scores{0.5f, kNegInf, 2.0f, -1.0f, 0.0f, 1.0f};
  const TokenDistribution q = candidate_distribution(kVocab, ids, scores, 1.0);
  constexpr int kDraws = 8000;
  // 4 degrees of freedom: 23.5 is exceeded with probability 1e-4 when the draws follow p.
  constexpr double kChiSquareLimit = 23.5;
  std::map<int32_t, int> plain, speculative;
  Rng rng(7, 0), draft_rng(7, 1);
  for (int i = 0; i < kDraws; ++i) {
    plain[sample_token(logits, {history, 1}, params, rng, mask).id] += 1;
    const int32_t x = q.sample(draft_rng);
    speculative[verify_draft(x, p, q, rng).token] += 1;
  }
  EXPECT_LT(chi_square(plain, p, allowed, kDraws), kChiSquareLimit);
  EXPECT_LT(chi_square(speculative, p, allowed, kDraws), kChiSquareLimit);
  // The statistic does see a wrong distribution: the drafter's own q is far from p.
  std::map<int32_t, int> drafts;
  for (int i = 0; i < kDraws; ++i) drafts[q.sample(draft_rng)] += 1;
  EXPECT_GT(chi_square(drafts, p, allowed, kDraws), 10 * kChiSquareLimit);
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
