#include "specula/sample/speculative_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "specula/util/error.h"

namespace specula {
namespace {

void check_same_vocab(const TokenDistribution& p, const TokenDistribution& q) {
  if (p.vocab_size() != q.vocab_size())
    fail("speculative sampling: target distribution has {} tokens but the draft distribution has {}", p.vocab_size(),
         q.vocab_size());
}

}  // namespace

TokenDistribution candidate_distribution(int64_t vocab_size, std::span<const int32_t> ids,
                                         std::span<const float> scores, double temperature) {
  if (ids.empty()) fail("draft distribution: no candidates");
  if (ids.size() != scores.size())
    fail("draft distribution: {} candidate ids but {} scores", ids.size(), scores.size());
  if (!(std::isfinite(temperature) && temperature >= 0.0))
    fail("draft distribution: temperature = {} is out of range (allowed: finite, >= 0)", temperature);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr float kPosInf = std::numeric_limits<float>::infinity();
  // Best candidate by (score desc, id asc), NaN as -inf.
  auto score = [&](size_t i) { return std::isnan(scores[i]) ? kNegInf : scores[i]; };
  size_t best = 0;
  for (size_t i = 1; i < ids.size(); ++i) {
    if (score(i) > score(best) || (score(i) == score(best) && ids[i] < ids[best])) best = i;
  }
  if (temperature == 0.0 || !(score(best) > kNegInf)) {
    // All -inf/NaN: the best by (score, id) is then the lowest candidate id.
    // from_sparse_weights validates every id (vocabulary, duplicates) before dropping the zeros.
    std::vector<TokenProb> all;
    all.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) all.push_back({ids[i], i == best ? 1.0 : 0.0});
    return TokenDistribution::from_sparse_weights(vocab_size, std::move(all));
  }
  const double max_score = score(best);
  const bool inf_mode = max_score == kPosInf;  // +inf candidates share the mass equally
  std::vector<TokenProb> w;
  w.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const float s = score(i);
    double weight = 0.0;
    if (inf_mode) {
      weight = s == kPosInf ? 1.0 : 0.0;
    } else if (s > kNegInf) {
      weight = std::exp((static_cast<double>(s) - max_score) / temperature);
    }
    w.push_back({ids[i], weight});
  }
  return TokenDistribution::from_sparse_weights(vocab_size, std::move(w));
}

bool accept_draft(int32_t x, const TokenDistribution& p, const TokenDistribution& q, Rng& rng) {
  check_same_vocab(p, q);
  const double qx = q.prob(x);
  if (!(qx > 0.0)) fail("speculative sampling: draft token {} has probability 0 under the draft distribution", x);
  const double u = rng.uniform();
  const double px = p.prob(x);
  return px >= qx || u * qx < px;  // u < p/q without the division
}

TokenDistribution residual_distribution(const TokenDistribution& p, const TokenDistribution& q) {
  check_same_vocab(p, q);
  if (p.is_dense()) {
    // O(V + |q|): copy p, subtract q on its own support.
    std::vector<double> r(static_cast<size_t>(p.vocab_size()), 0.0);
    p.for_each([&](int32_t id, double pv) { r[static_cast<size_t>(id)] = pv; });
    q.for_each(
        [&](int32_t id, double qv) { r[static_cast<size_t>(id)] = std::max(0.0, r[static_cast<size_t>(id)] - qv); });
    double total = 0.0;
    for (const double v : r) total += v;
    if (!(total > 0.0)) return p;
    return TokenDistribution::from_dense_weights(std::move(r));
  }
  std::vector<TokenProb> r;
  r.reserve(static_cast<size_t>(p.support_size()));
  double total = 0.0;
  p.for_each([&](int32_t id, double pv) {
    const double v = std::max(0.0, pv - q.prob(id));
    total += v;
    r.push_back({id, v});
  });
  if (!(total > 0.0)) return p;
  return TokenDistribution::from_sparse_weights(p.vocab_size(), std::move(r));
}

DraftVerdict verify_draft(int32_t x, const TokenDistribution& p, const TokenDistribution& q, Rng& rng) {
  DraftVerdict v;
  v.accepted = accept_draft(x, p, q, rng);
  v.token = v.accepted ? x : residual_distribution(p, q).sample(rng);
  return v;
}

}  // namespace specula
