// Speculative-sampling helpers: the drafter's candidate distribution q, accept with min(1, p/q),
// the residual normalize(max(0, p - q)) and its fallback, the greedy reduction, and a bounded
// statistical test that accept/resample reproduces p exactly in distribution for q != p.
#include "specula/sample/speculative_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "special_floats.h"
#include "specula/sample/logits_pipeline.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using test::kNaN;

TokenDistribution sparse(int64_t V, std::vector<TokenProb> w) {
  return TokenDistribution::from_sparse_weights(V, std::move(w));
}

TEST(SampleSpeculative, CandidateDistributionIsSoftmaxOverCandidatesAtTemperature) {
  const std::vector<int32_t> ids = {7, 2, 5};
  const std::vector<float> scores = {static_cast<float>(std::log(2.0)), static_cast<float>(std::log(1.0)),
                                     static_cast<float>(std::log(5.0))};
  const TokenDistribution q = candidate_distribution(10, ids, scores, 1.0);
  EXPECT_NEAR(q.prob(7), 0.25, 1e-7);
  EXPECT_NEAR(q.prob(2), 0.125, 1e-7);
  EXPECT_NEAR(q.prob(5), 0.625, 1e-7);
  EXPECT_EQ(q.prob(0), 0.0);
  EXPECT_FALSE(q.is_dense());
  const TokenDistribution q_half = candidate_distribution(10, ids, scores, 0.5);  // weights squared: 4, 1, 25
  EXPECT_NEAR(q_half.prob(5), 25.0 / 30.0, 1e-7);
}

TEST(SampleSpeculative, CandidateDistributionGreedyAndBadValues) {
  const std::vector<int32_t> ids = {9, 4, 6};
  const TokenDistribution g = candidate_distribution(10, ids, std::vector<float>{1.0f, 3.0f, 3.0f}, 0.0);
  EXPECT_EQ(g.support_size(), 1);
  EXPECT_EQ(g.prob(4), 1.0);  // tie between 4 and 6: lowest id
  const TokenDistribution n = candidate_distribution(10, ids, std::vector<float>{kNaN, 0.0f, 0.0f}, 1.0);
  EXPECT_EQ(n.prob(9), 0.0);
  EXPECT_NEAR(n.prob(4), 0.5, 1e-12);
  const TokenDistribution all_bad = candidate_distribution(10, ids, std::vector<float>{kNaN, kNaN, kNaN}, 1.0);
  EXPECT_EQ(all_bad.prob(4), 1.0);  // the lowest candidate id
  EXPECT_THROW(candidate_distribution(10, std::vector<int32_t>{1, 1}, std::vector<float>{0, 0}, 1.0), Error);
  EXPECT_THROW(candidate_distribution(10, std::vector<int32_t>{10}, std::vector<float>{0}, 1.0), Error);
  EXPECT_THROW(candidate_distribution(10, std::vector<int32_t>{1}, std::vector<float>{0, 1}, 1.0), Error);
  EXPECT_THROW(candidate_distribution(10, std::vector<int32_t>{}, std::vector<float>{}, 1.0), Error);
  EXPECT_THROW(candidate_distribution(10, std::vector<int32_t>{1}, std::vector<float>{0}, -1.0), Error);
}

TEST(SampleSpeculative, AcceptIsMinOneRatio) {
  const TokenDistribution p = sparse(4, {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
  const TokenDistribution q = sparse(4, {{0, 0.5}, {3, 0.5}});
  Rng rng(1);
  int accepted0 = 0, accepted3 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    accepted0 += accept_draft(0, p, q, rng);
    accepted3 += accept_draft(3, p, q, rng);
  }
  EXPECT_NEAR(accepted0 / double(n), 0.2, 0.015);  // p/q = 0.1 / 0.5
  EXPECT_NEAR(accepted3 / double(n), 0.8, 0.015);  // p/q = 0.4 / 0.5
  Rng r2(2);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(accept_draft(3, sparse(4, {{3, 1.0}}), q, r2));  // p >= q
  const TokenDistribution p_no1 = sparse(4, {{0, 0.5}, {2, 0.5}});
  const TokenDistribution q1 = sparse(4, {{1, 0.5}, {2, 0.5}});
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(accept_draft(1, p_no1, q1, r2));  // p(x) = 0
  EXPECT_THROW(accept_draft(1, p, q, r2), Error);                               // q(x) = 0
  EXPECT_THROW(accept_draft(0, p, sparse(5, {{0, 1.0}}), r2), Error);           // vocab mismatch
}

TEST(SampleSpeculative, AcceptDrawsExactlyOneUniform) {
  const TokenDistribution p = sparse(4, {{0, 0.1}, {3, 0.9}});
  const TokenDistribution q = sparse(4, {{0, 0.5}, {3, 0.5}});
  Rng a(9), b(9);
  accept_draft(3, p, q, a);
  b.uniform();
  EXPECT_EQ(a.state(), b.state());
}

TEST(SampleSpeculative, ResidualIsNormalizedPositivePartOfPMinusQ) {
  const TokenDistribution p = sparse(4, {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
  const TokenDistribution q = sparse(4, {{0, 0.5}, {3, 0.5}});
  // max(0, p - q) = [0, 0.2, 0.3, 0] -> [0, 0.4, 0.6, 0]
  for (const TokenDistribution& pp : {p, TokenDistribution::from_dense_weights({0.1, 0.2, 0.3, 0.4})}) {
    const TokenDistribution r = residual_distribution(pp, q);
    EXPECT_EQ(r.is_dense(), pp.is_dense());
    EXPECT_EQ(r.support_size(), 2);
    EXPECT_NEAR(r.prob(1), 0.4, 1e-12);
    EXPECT_NEAR(r.prob(2), 0.6, 1e-12);
  }
}

TEST(SampleSpeculative, ResidualFallsBackToPWhenAllZero) {
  const TokenDistribution p = sparse(4, {{1, 0.25}, {2, 0.75}});
  const TokenDistribution r = residual_distribution(p, p);
  EXPECT_EQ(r.entries(), p.entries());
  const TokenDistribution dense_p = TokenDistribution::from_dense_weights({0.0, 0.25, 0.75, 0.0});
  EXPECT_EQ(residual_distribution(dense_p, p).entries(), dense_p.entries());
}

TEST(SampleSpeculative, GreedyReducesToArgmaxMatching) {
  const TokenDistribution p = TokenDistribution::point_mass(8, 5);
  Rng rng(4);
  const DraftVerdict same = verify_draft(5, p, TokenDistribution::point_mass(8, 5), rng);
  EXPECT_TRUE(same.accepted);
  EXPECT_EQ(same.token, 5);
  const DraftVerdict other = verify_draft(2, p, TokenDistribution::point_mass(8, 2), rng);
  EXPECT_FALSE(other.accepted);
  EXPECT_EQ(other.token, 5);
}

// Runs n rounds of "x ~ q; verify_draft(x, p, q)" and returns the count of each emitted token.
std::vector<int64_t> emitted_counts(const TokenDistribution& p, const TokenDistribution& q, int n, uint64_t seed,
                                    int64_t* accepted) {
  Rng draft_rng(seed, 0), verify_rng(seed, 1);
  std::vector<int64_t> count(static_cast<size_t>(p.vocab_size()), 0);
  *accepted = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t x = q.sample(draft_rng);
    const DraftVerdict v = verify_draft(x, p, q, verify_rng);
    *accepted += v.accepted;
    ++count[static_cast<size_t>(v.token)];
  }
  return count;
}

// Pearson chi-square of the counts against p over p's support; tokens outside it must never appear.
double chi_square(const std::vector<int64_t>& count, const TokenDistribution& p, int n) {
  double chi2 = 0.0;
  for (size_t id = 0; id < count.size(); ++id) {
    const double expected = p.prob(static_cast<int32_t>(id)) * n;
    if (expected == 0.0) {
      EXPECT_EQ(count[id], 0) << "token " << id << " has p = 0 but was emitted";
      continue;
    }
    chi2 += (count[id] - expected) * (count[id] - expected) / expected;
  }
  return chi2;
}

TEST(SampleSpeculative, AcceptResampleReproducesPInDistribution) {
  // p: the pipeline's filtered distribution on V = 8 (top-k 6 drops tokens 0 and 5); q: a sparse
  // drafter distribution that puts mass on a dropped token (5) and misses p's tokens 1, 4 and 6.
  const std::vector<float> logits = {-1.0f, 0.4f, 1.1f, 0.2f, 0.9f, -0.8f, 1.6f, 0.0f};
  SamplingParams params;
  params.temperature = 0.8;
  params.top_k = 6;
  const TokenDistribution p = build_distribution(logits, {}, params).p;
  ASSERT_EQ(p.support_size(), 6);
  ASSERT_EQ(p.prob(0), 0.0);
  ASSERT_EQ(p.prob(5), 0.0);
  const TokenDistribution q = sparse(8, {{2, 0.45}, {3, 0.05}, {5, 0.2}, {7, 0.3}});
  const int n = 200000;
  int64_t accepted = 0;
  const std::vector<int64_t> count = emitted_counts(p, q, n, 2026, &accepted);
  // 5 degrees of freedom: P(chi2 > 30) ~ 1.5e-5 under a correct sampler; a sampler that resampled
  // from p instead of the residual, or accepted with p/q uncapped, lands in the hundreds.
  EXPECT_LT(chi_square(count, p, n), 30.0);
  double overlap = 0.0;  // the expected acceptance rate: sum of min(p, q)
  q.for_each([&](int32_t id, double qv) { overlap += std::min(qv, p.prob(id)); });
  EXPECT_NEAR(accepted / double(n), overlap, 0.005);
}

TEST(SampleSpeculative, AcceptResampleReproducesDenseP) {
  // Dense p (no filter), q concentrated on two tokens: exercises the dense residual path.
  const std::vector<float> logits = {0.5f, -0.3f, 1.0f, 0.0f, 0.7f, -1.2f, 0.2f, 0.9f};
  SamplingParams params;
  params.temperature = 1.3;
  const TokenDistribution p = build_distribution(logits, {}, params).p;
  ASSERT_TRUE(p.is_dense());
  const TokenDistribution q = sparse(8, {{2, 0.7}, {5, 0.3}});
  const int n = 100000;
  int64_t accepted = 0;
  const std::vector<int64_t> count = emitted_counts(p, q, n, 7, &accepted);
  EXPECT_LT(chi_square(count, p, n), 35.0);  // 7 degrees of freedom: P(chi2 > 35) ~ 1.2e-5
}

}  // namespace
}  // namespace specula
