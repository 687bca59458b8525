// The logits -> distribution pipeline (logits_pipeline.h) and plain sampling (sampler.h): each
// processor and filter alone and combined against hand-computed distributions on tiny
// vocabularies, the documented order, penalties on the right tokens, greedy tie-break, NaN/Inf
// handling, seeded determinism, and the fast selection paths against a brute-force reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "error_of.h"
#include "special_floats.h"
#include "specula/sample/logits_pipeline.h"
#include "specula/sample/sampler.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using test::error_of;
using test::kInf;
using test::kNaN;

// Logits whose softmax at temperature 1 is proportional to `weights`.
std::vector<float> log_of(std::vector<double> weights) {
  std::vector<float> out;
  for (const double w : weights) out.push_back(static_cast<float>(std::log(w)));
  return out;
}

SamplingParams sampling(double temperature = 1.0) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

TokenDistribution dist(const std::vector<float>& logits, const SamplingParams& params,
                       std::span<const int32_t> history = {}, size_t prompt_length = 0) {
  return build_distribution(logits, TokenHistory{history, prompt_length}, params).p;
}

// Every token of the vocabulary has the expected probability (1e-6: logits are float).
void expect_probs(const TokenDistribution& d, const std::vector<double>& expected) {
  ASSERT_EQ(d.vocab_size(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(d.prob(static_cast<int32_t>(i)), expected[i], 1e-6) << "token " << i;
  int64_t nonzero = 0;
  for (const double e : expected) nonzero += e > 0.0;
  EXPECT_EQ(d.support_size(), nonzero);
}

// ---- no filters, temperature ------------------------------------------------------------------

TEST(Sampler, PlainSoftmaxIsDense) {
  const TokenDistribution d = dist(log_of({1, 2, 3, 4}), sampling());
  expect_probs(d, {0.1, 0.2, 0.3, 0.4});
  EXPECT_TRUE(d.is_dense());
}

TEST(Sampler, TemperatureDividesLogits) {
  // softmax(log(k^2) / 2) = k / 10; at T = 0.5, k^2 -> k^4.
  expect_probs(dist(log_of({1, 4, 9, 16}), sampling(2.0)), {0.1, 0.2, 0.3, 0.4});
  expect_probs(dist(log_of({1, 2, 3, 4}), sampling(0.5)), {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0});
}

// ---- filters alone -----------------------------------------------------------------------------

TEST(Sampler, TopKKeepsTheKBestAndRenormalizesSparsely) {
  SamplingParams p = sampling();
  p.top_k = 2;
  const TokenDistribution d = dist(log_of({1, 2, 3, 4}), p);
  expect_probs(d, {0, 0, 3 / 7.0, 4 / 7.0});
  EXPECT_FALSE(d.is_dense());
  p.top_k = 4;  // k >= V: no cut
  expect_probs(dist(log_of({1, 2, 3, 4}), p), {0.1, 0.2, 0.3, 0.4});
}

TEST(Sampler, TopKTiesGoToTheLowerId) {
  SamplingParams p = sampling();
  p.top_k = 2;
  expect_probs(dist({0.0f, 1.0f, 1.0f, 1.0f}, p), {0, 0.5, 0.5, 0});
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  SamplingParams p = sampling();
  p.top_p = 0.6;  // 0.4 + 0.3 = 0.7 >= 0.6
  expect_probs(dist(log_of({1, 2, 3, 4}), p), {0, 0, 3 / 7.0, 4 / 7.0});
  p.top_p = 0.75;  // 0.4 + 0.3 + 0.2 = 0.9
  expect_probs(dist(log_of({1, 2, 3, 4}), p), {0, 2 / 9.0, 3 / 9.0, 4 / 9.0});
  p.top_p = 0.3;  // the top token alone is enough
  expect_probs(dist(log_of({1, 2, 3, 4}), p), {0, 0, 0, 1});
}

TEST(Sampler, TopPTiesGoToTheLowerIdAndTheBoundaryTokenIsKept) {
  SamplingParams p = sampling();
  p.top_p = 0.5;  // 0.25 + 0.25 reaches 0.5 exactly: two tokens, the lowest ids
  expect_probs(dist({0.0f, 0.0f, 0.0f, 0.0f}, p), {0.5, 0.5, 0, 0});
  p.top_p = 0.51;
  expect_probs(dist({0.0f, 0.0f, 0.0f, 0.0f}, p), {1 / 3.0, 1 / 3.0, 1 / 3.0, 0});
}

TEST(Sampler, MinPIsRelativeToTheMaxProbability) {
  SamplingParams p = sampling();
  p.min_p = 0.45;  // threshold 0.45 * 0.4 = 0.18: drops 0.1 only
  expect_probs(dist(log_of({1, 2, 3, 4}), p), {0, 2 / 9.0, 3 / 9.0, 4 / 9.0});
  p.min_p = 0.8;  // threshold 0.32
  expect_probs(dist(log_of({1, 2, 3, 4}), p), {0, 0, 0, 1});
  p.min_p = 1.0;  // only ties with the max survive
  expect_probs(dist({2.0f, 1.0f, 2.0f, 0.0f}, p), {0.5, 0, 0.5, 0});
}

// ---- filters combined, in the documented order (temperature, top-k, top-p, min-p) --------------

TEST(Sampler, TopPActsOnTheTopKSurvivors) {
  // weights 1..8. top-k 3 -> {8,7,6}/21; top-p 0.6: 8/21 = 0.38, 15/21 = 0.71 -> {8,7}.
  // (top-p first would keep {8,7,6,5} and top-k 3 would then leave {8,7,6}.)
  SamplingParams p = sampling();
  p.top_k = 3;
  p.top_p = 0.6;
  expect_probs(dist(log_of({1, 2, 3, 4, 5, 6, 7, 8}), p), {0, 0, 0, 0, 0, 0, 7 / 15.0, 8 / 15.0});
}

TEST(Sampler, TemperatureComesBeforeTheFilters) {
  // T = 0.5 squares the weights: top-k 3 -> {64,49,36}/149; top-p 0.6: 64/149 = 0.43,
  // 113/149 = 0.76 -> {64,49}. At T = 1 the same filters keep {8,7} with 8/15, 7/15.
  SamplingParams p = sampling(0.5);
  p.top_k = 3;
  p.top_p = 0.6;
  expect_probs(dist(log_of({1, 2, 3, 4, 5, 6, 7, 8}), p), {0, 0, 0, 0, 0, 0, 49 / 113.0, 64 / 113.0});
  p.min_p = 0.7;  // 49 >= 0.7 * 64 = 44.8: no further cut
  expect_probs(dist(log_of({1, 2, 3, 4, 5, 6, 7, 8}), p), {0, 0, 0, 0, 0, 0, 49 / 113.0, 64 / 113.0});
  p.min_p = 0.8;  // 49 < 51.2
  expect_probs(dist(log_of({1, 2, 3, 4, 5, 6, 7, 8}), p), {0, 0, 0, 0, 0, 0, 0, 1});
}

TEST(Sampler, MinPAfterTopP) {
  // weights 1..8 (sum 36): top-p 0.8 -> {8,7,6,5,4} (30/36 = 0.83); min-p 0.6 -> >= 4.8 -> {8,7,6,5}.
  SamplingParams p = sampling();
  p.top_p = 0.8;
  p.min_p = 0.6;
  expect_probs(dist(log_of({1, 2, 3, 4, 5, 6, 7, 8}), p), {0, 0, 0, 0, 5 / 26.0, 6 / 26.0, 7 / 26.0, 8 / 26.0});
}

// ---- processors ---------------------------------------------------------------------------------

TEST(Sampler, LogitBiasIsAdditiveAndMinusInfBans) {
  SamplingParams p = sampling();
  p.logit_bias = {{1, std::log(3.0)}};
  expect_probs(dist({0, 0, 0, 0}, p), {1 / 6.0, 3 / 6.0, 1 / 6.0, 1 / 6.0});
  p.logit_bias = {{0, -std::numeric_limits<double>::infinity()}};
  expect_probs(dist({5, 0, 0, 0}, p), {0, 1 / 3.0, 1 / 3.0, 1 / 3.0});
  // A -inf bias bans even a +inf logit.
  expect_probs(dist({kInf, 0, 0, 0}, p), {0, 1 / 3.0, 1 / 3.0, 1 / 3.0});
}

TEST(Sampler, SuppressTokensGetMinusInf) {
  SamplingParams p = sampling();
  p.suppress_tokens = {3};
  expect_probs(dist(log_of({1, 2, 3, 4}), p), {1 / 6.0, 2 / 6.0, 3 / 6.0, 0});
  p.temperature = 0.0;  // processors apply to greedy too
  EXPECT_EQ(dist(log_of({1, 2, 3, 4}), p).argmax(), 2);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveMultipliesNegativeOncePerDistinctToken) {
  SamplingParams p = sampling();
  p.repetition_penalty = 2.0;
  const std::vector<int32_t> history = {0, 1, 1, 4};  // prompt [0], generated [1, 1, 4]
  std::vector<float> out;
  process_logits(std::vector<float>{2.0f, -2.0f, 1.0f, 0.5f, 0.0f}, TokenHistory{history, 1}, p, out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f, 0.0f}));  // prompt tokens count too
  // The resulting distribution: softmax of the penalized logits.
  const TokenDistribution d = dist({2.0f, -2.0f, 1.0f, 0.5f, 0.0f}, p, history, 1);
  const double z = std::exp(1.0) + std::exp(-4.0) + std::exp(1.0) + std::exp(0.5) + 1.0;
  expect_probs(d, {std::exp(1.0) / z, std::exp(-4.0) / z, std::exp(1.0) / z, std::exp(0.5) / z, 1.0 / z});
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  SamplingParams p = sampling();
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  const std::vector<int32_t> history = {2, 2, 1, 1, 1, 3};  // prompt [2, 2], generated [1, 1, 1, 3]
  std::vector<float> out;
  process_logits(std::vector<float>{0, 0, 0, 0}, TokenHistory{history, 2}, p, out);
  // token 1: 3 * 0.25 + 0.5; token 3: 0.25 + 0.5; token 2 is prompt-only: untouched.
  EXPECT_EQ(out, (std::vector<float>{0.0f, -1.25f, 0.0f, -0.75f}));
  p.presence_penalty = -1.0;  // negative values encourage repetition
  p.frequency_penalty = 0.0;
  process_logits(std::vector<float>{0, 0, 0, 0}, TokenHistory{history, 2}, p, out);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 1.0f, 0.0f, 1.0f}));
}

TEST(Sampler, ProcessorOrderBiasThenRepetitionThenPresence) {
  SamplingParams p = sampling();
  p.logit_bias = {{0, 1.0}};
  p.repetition_penalty = 2.0;
  p.presence_penalty = 0.5;
  const std::vector<int32_t> history = {0};  // generated (prompt_length 0)
  std::vector<float> out;
  process_logits(std::vector<float>{1.0f, 0.0f}, TokenHistory{history, 0}, p, out);
  EXPECT_EQ(out[0], 0.5f);  // (1 + 1) / 2 - 0.5; other orders give 0.75 or 1.0
}

TEST(Sampler, PenaltiesSeeOnlyThisCallsHistory) {
  // The per-token marks and counts are reused between calls: a second call must not inherit them.
  SamplingParams p = sampling();
  p.repetition_penalty = 2.0;
  p.frequency_penalty = 1.0;
  std::vector<float> out;
  const std::vector<int32_t> first = {1, 1, 2};
  process_logits(std::vector<float>{1, 1, 1, 1}, TokenHistory{first, 0}, p, out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -1.5f, -0.5f, 1.0f}));
  const std::vector<int32_t> second = {3};
  process_logits(std::vector<float>{1, 1, 1, 1}, TokenHistory{second, 0}, p, out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 1.0f, 1.0f, -0.5f}));
}

// ---- greedy -------------------------------------------------------------------------------------

TEST(Sampler, GreedyIsArgmaxWithLowestIdTieBreakAndIgnoresFilters) {
  SamplingParams p = sampling(0.0);
  p.top_k = 1;
  p.top_p = 0.1;
  p.min_p = 1.0;
  const TokenDistribution d = dist({1.0f, 3.0f, 3.0f, 2.0f}, p);
  EXPECT_EQ(d.support_size(), 1);
  EXPECT_EQ(d.prob(1), 1.0);
  Rng rng(5);
  const RngState before = rng.state();
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(sample_token(logits, {}, p, rng).id, 1);
  EXPECT_EQ(rng.state(), before);  // greedy draws nothing
}

TEST(Sampler, ArgmaxLowestIdSkipsNaN) {
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{kNaN, 2.0f, kNaN, 2.0f}), 1);
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{-kInf, kNaN}), -1);
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{0.0f, kInf, kInf}), 1);
}

// ---- NaN / Inf ----------------------------------------------------------------------------------

TEST(Sampler, NaNLogitsAreMinusInfAndFlagged) {
  const ProcessedDistribution r = build_distribution(std::vector<float>{kNaN, 1.0f, kNaN, 1.0f}, {}, sampling());
  EXPECT_EQ(r.issues.nan_logits, 2);
  EXPECT_FALSE(r.issues.all_masked);
  expect_probs(r.p, {0, 0.5, 0, 0.5});
}

TEST(Sampler, PlusInfLogitsShareTheMassUniformly) {
  SamplingParams p = sampling(0.7);
  p.top_k = 3;
  const ProcessedDistribution r = build_distribution(std::vector<float>{0.0f, kInf, 1.0f, kInf}, {}, p);
  EXPECT_EQ(r.issues.pos_inf_logits, 2);
  expect_probs(r.p, {0, 0.5, 0, 0.5});
  EXPECT_EQ(dist({0.0f, kInf, 1.0f, kInf}, sampling(0.0)).argmax(), 1);
}

TEST(Sampler, EverythingMaskedFallsBackToTokenZeroAndFlags) {
  Rng rng(1);
  for (const SamplingParams& p : {sampling(0.0), sampling(1.0)}) {
    const std::vector<float> bad = {kNaN, -kInf, kNaN};
    const ProcessedDistribution r = build_distribution(bad, {}, p);
    EXPECT_TRUE(r.issues.all_masked);
    EXPECT_EQ(r.issues.nan_logits, 2);
    EXPECT_EQ(r.p.support_size(), 1);
    EXPECT_EQ(r.p.prob(0), 1.0);
    const SampledToken t = sample_token(bad, {}, p, rng);
    EXPECT_EQ(t.id, 0);
    EXPECT_TRUE(t.issues.all_masked);
  }
  SamplingParams s = sampling();
  s.suppress_tokens = {0, 1, 2};
  EXPECT_TRUE(build_distribution(std::vector<float>{1, 2, 3}, {}, s).issues.all_masked);
}

// ---- sampling -----------------------------------------------------------------------------------

TEST(Sampler, SeededSamplingIsReproducible) {
  SamplingParams p = sampling(0.9);
  p.top_k = 6;
  const std::vector<float> logits = {0.3f, 1.2f, -0.5f, 0.9f, 2.0f, 0.1f, 1.5f, -1.0f};
  auto run = [&](uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 500; ++i) out.push_back(sample_token(logits, {}, p, rng).id);
    return out;
  };
  EXPECT_EQ(run(11), run(11));
  EXPECT_NE(run(11), run(12));
}

TEST(Sampler, DrawsFollowTheDistribution) {
  const TokenDistribution d = dist(log_of({1, 2, 3, 4}), sampling());
  Rng rng(2024);
  std::vector<int> count(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++count[static_cast<size_t>(d.sample(rng))];
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(count[static_cast<size_t>(i)] / double(n), (i + 1) / 10.0, 0.01);
}

TEST(Sampler, InverseCdfWalksIdsInAscendingOrder) {
  const TokenDistribution d = dist(log_of({1, 2, 3, 4}), sampling());
  EXPECT_EQ(d.draw(0.0), 0);
  EXPECT_EQ(d.draw(0.0999), 0);
  EXPECT_EQ(d.draw(0.1001), 1);
  EXPECT_EQ(d.draw(0.5999), 2);
  EXPECT_EQ(d.draw(0.6001), 3);
  EXPECT_EQ(d.draw(std::nextafter(1.0, 0.0)), 3);
}

// ---- fast paths against a brute-force reference -------------------------------------------------

// Full sort by (logit desc, id asc), then temperature, top-k, top-p, min-p on the sorted list.
std::vector<double> brute_force(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  });
  size_t keep = order.size();
  if (p.top_k > 0) keep = std::min(keep, static_cast<size_t>(p.top_k));
  const double m = logits[static_cast<size_t>(order[0])];
  std::vector<double> w(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i)
    total += (w[i] = std::exp((logits[static_cast<size_t>(order[i])] - m) / p.temperature));
  if (p.top_p < 1.0) {
    double cum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      cum += w[i];
      if (cum >= p.top_p * total) {
        keep = i + 1;
        break;
      }
    }
  }
  size_t n = 1;
  while (n < keep && w[n] >= p.min_p * w[0]) ++n;
  keep = n;
  std::vector<double> probs(logits.size(), 0.0);
  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += w[i];
  for (size_t i = 0; i < keep; ++i) probs[static_cast<size_t>(order[i])] = w[i] / kept;
  return probs;
}

TEST(Sampler, SelectionPathsMatchBruteForceOnRandomLogits) {
  Rng rng(77);
  const size_t V = 3000;  // > the first top-p chunk, so the chunked partial sort has to grow
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<float> logits(V);
    // Quantized values create exact ties; a spread of 0..12 gives both peaked and flat regions.
    for (float& x : logits) x = static_cast<float>(std::floor(rng.uniform() * 48.0) / 4.0);
    SamplingParams p = sampling(0.5 + trial * 0.25);
    p.top_k = (trial % 3 == 0) ? 0 : static_cast<int>(1 + rng.uniform() * 400);
    p.top_p = (trial % 2 == 0) ? 0.5 + 0.49 * rng.uniform() : 1.0;
    p.min_p = (trial % 4 == 1) ? 0.2 * rng.uniform() : 0.0;
    const TokenDistribution d = dist(logits, p);
    const std::vector<double> expected = brute_force(logits, p);
    int64_t support = 0;
    for (size_t i = 0; i < V; ++i) {
      support += expected[i] > 0.0;
      ASSERT_NEAR(d.prob(static_cast<int32_t>(i)), expected[i], 1e-12) << "trial " << trial << " token " << i;
    }
    EXPECT_EQ(d.support_size(), support) << "trial " << trial;
  }
}

TEST(Sampler, FullGemmaVocabularyTopKIsSparse) {
  const size_t V = 262144;
  Rng rng(3);
  std::vector<float> logits(V);
  for (float& x : logits) x = static_cast<float>(rng.uniform() * 20.0 - 10.0);
  SamplingParams p = sampling();
  p.top_k = 64;
  p.top_p = 0.95;
  const TokenDistribution d = dist(logits, p);
  EXPECT_FALSE(d.is_dense());
  EXPECT_LE(d.support_size(), 64);
  EXPECT_GE(d.support_size(), 1);
  EXPECT_EQ(d.argmax(), argmax_lowest_id(logits));
}

// ---- bad input ----------------------------------------------------------------------------------

TEST(Sampler, BadTokenIdsAndHistoryThrowNamingTheProblem) {
  const std::vector<float> logits = {0, 0, 0, 0};
  SamplingParams p = sampling();
  p.suppress_tokens = {4};
  EXPECT_NE(error_of([&] { dist(logits, p); }).find("suppress_tokens token id 4"), std::string::npos);
  p = sampling();
  const std::vector<int32_t> history = {1, 9};
  p.repetition_penalty = 1.5;
  const std::string msg = error_of([&] { dist(logits, p, history, 1); });
  EXPECT_NE(msg.find("history token 9 (position 1)"), std::string::npos) << msg;
  const std::vector<int32_t> short_history = {1};
  EXPECT_NE(error_of([&] { dist(logits, p, short_history, 2); }).find("prompt_length 2"), std::string::npos);
  EXPECT_NE(error_of([&] { dist({}, p); }).find("empty logits"), std::string::npos);
  p.temperature = -1;
  EXPECT_NE(error_of([&] { dist(logits, p); }).find("temperature = -1"), std::string::npos);
}

}  // namespace
}  // namespace specula
