#include "specula/sample/token_distribution.h"

#include <algorithm>
#include <cmath>

#include "specula/sample/rng.h"
#include "specula/util/error.h"

namespace specula {
namespace {

void check_weight(int32_t id, double w) {
  if (!(std::isfinite(w) && w >= 0.0))
    fail("token distribution: weight of token {} is {} (allowed: finite, >= 0)", id, w);
}

}  // namespace

TokenDistribution TokenDistribution::point_mass(int64_t vocab_size, int32_t id) {
  if (id < 0 || id >= vocab_size)
    fail("token distribution: point mass on token {} outside the vocabulary of {} tokens", id, vocab_size);
  TokenDistribution d;
  d.vocab_size_ = vocab_size;
  d.ids_ = {id};
  d.probs_ = {1.0};
  d.support_size_ = 1;
  d.total_ = 1.0;
  return d;
}

TokenDistribution TokenDistribution::from_sparse_weights(int64_t vocab_size, std::vector<TokenProb> weights) {
  if (vocab_size <= 0) fail("token distribution: vocabulary size {} must be positive", vocab_size);
  std::sort(weights.begin(), weights.end(), [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; });
  TokenDistribution d;
  d.vocab_size_ = vocab_size;
  double total = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto [id, w] = weights[i];
    if (id < 0 || id >= vocab_size)
      fail("token distribution: token {} is outside the vocabulary of {} tokens", id, vocab_size);
    if (i > 0 && weights[i - 1].id == id) fail("token distribution: token {} appears twice", id);
    check_weight(id, w);
    if (w > 0.0) {
      d.ids_.push_back(id);
      d.probs_.push_back(w);
      total += w;
    }
  }
  if (!(total > 0.0)) fail("token distribution: total weight is 0 (no token can be drawn)");
  if (!std::isfinite(total)) fail("token distribution: total weight overflows");
  d.total_ = 0.0;
  for (double& p : d.probs_) {
    p /= total;
    d.total_ += p;
  }
  d.support_size_ = static_cast<int64_t>(d.ids_.size());
  return d;
}

TokenDistribution TokenDistribution::from_dense_weights(std::vector<double> weights) {
  if (weights.empty()) fail("token distribution: vocabulary size 0 must be positive");
  double total = 0.0;
  int64_t support = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    check_weight(static_cast<int32_t>(i), weights[i]);
    total += weights[i];
    support += weights[i] > 0.0;
  }
  if (!(total > 0.0)) fail("token distribution: total weight is 0 (no token can be drawn)");
  if (!std::isfinite(total)) fail("token distribution: total weight overflows");
  TokenDistribution d;
  d.vocab_size_ = static_cast<int64_t>(weights.size());
  d.dense_ = true;
  d.probs_ = std::move(weights);
  for (double& p : d.probs_) {
    p /= total;
    d.total_ += p;
  }
  d.support_size_ = support;
  return d;
}

double TokenDistribution::prob(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return 0.0;
  if (dense_) return probs_[static_cast<size_t>(id)];
  const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  if (it == ids_.end() || *it != id) return 0.0;
  return probs_[static_cast<size_t>(it - ids_.begin())];
}

std::vector<TokenProb> TokenDistribution::entries() const {
  std::vector<TokenProb> out;
  out.reserve(static_cast<size_t>(support_size_));
  for_each([&](int32_t id, double p) { out.push_back({id, p}); });
  return out;
}

int32_t TokenDistribution::argmax() const {
  int32_t best = -1;
  double best_p = 0.0;
  for_each([&](int32_t id, double p) {
    if (p > best_p) {  // strict: the first (lowest) id wins ties
      best = id;
      best_p = p;
    }
  });
  return best;
}

int32_t TokenDistribution::draw(double u) const {
  if (support_size_ == 0) fail("token distribution: cannot draw from an empty distribution");
  const double target = u * total_;
  double cumulative = 0.0;
  int32_t last = -1;
  int32_t chosen = -1;
  if (dense_) {
    for (size_t i = 0; i < probs_.size() && chosen < 0; ++i) {
      if (probs_[i] <= 0.0) continue;
      cumulative += probs_[i];
      last = static_cast<int32_t>(i);
      if (cumulative > target) chosen = last;
    }
  } else {
    for (size_t i = 0; i < ids_.size() && chosen < 0; ++i) {
      cumulative += probs_[i];
      last = ids_[i];
      if (cumulative > target) chosen = last;
    }
  }
  // Rounding can leave the final cumulative sum a hair below target: the last token absorbs it.
  return chosen >= 0 ? chosen : last;
}

int32_t TokenDistribution::sample(Rng& rng) const {
  if (support_size_ == 0) fail("token distribution: cannot sample from an empty distribution");
  return draw(rng.uniform());
}

}  // namespace specula
