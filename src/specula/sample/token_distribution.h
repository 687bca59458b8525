#pragma once
// A probability distribution over a vocabulary, as the sampler draws from it and as speculative
// sampling compares target (p) and drafter (q) distributions. Two representations:
// - dense: one probability per token id (O(1) lookup), used when most of the vocabulary survives;
// - sparse: the support as ascending token ids with their probabilities (O(log n) lookup), used when
//   filters (top-k, top-p, min-p) or a drafter's candidate set cut the vocabulary.
// Probabilities are doubles, normalized to sum to 1 (up to rounding) at construction.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace specula {

class Rng;

struct TokenProb {
  int32_t id;
  double prob;
  bool operator==(const TokenProb&) const = default;
};

class TokenDistribution {
 public:
  TokenDistribution() = default;  // empty: vocab_size() == 0, no support

  // All mass on `id`.
  static TokenDistribution point_mass(int64_t vocab_size, int32_t id);
  // Sparse, from unnormalized weights (finite, >= 0; ids distinct and in [0, vocab_size); zero
  // weights are dropped). Throws specula::Error on bad input or when the total weight is 0.
  static TokenDistribution from_sparse_weights(int64_t vocab_size, std::vector<TokenProb> weights);
  // Dense, from one unnormalized weight per token id (same rules).
  static TokenDistribution from_dense_weights(std::vector<double> weights);

  int64_t vocab_size() const { return vocab_size_; }
  bool is_dense() const { return dense_; }
  int64_t support_size() const { return support_size_; }  // tokens with probability > 0
  bool empty() const { return support_size_ == 0; }

  // p(id); 0 outside the support or the vocabulary. O(1) dense, O(log n) sparse.
  double prob(int32_t id) const;

  // Calls f(id, prob) for every token with prob > 0, in ascending id order.
  template <typename F>
  void for_each(F&& f) const {
    if (dense_) {
      for (size_t i = 0; i < probs_.size(); ++i)
        if (probs_[i] > 0.0) f(static_cast<int32_t>(i), probs_[i]);
    } else {
      for (size_t i = 0; i < ids_.size(); ++i) f(ids_[i], probs_[i]);
    }
  }
  std::vector<TokenProb> entries() const;  // the support, ascending ids

  // The most probable token, lowest id on ties; -1 when empty.
  int32_t argmax() const;

  // Inverse-CDF draw for a uniform u in [0, 1): walks the support in ascending id order and returns
  // the first token whose cumulative probability exceeds u * (total mass). Deterministic in u.
  int32_t draw(double u) const;
  // draw(rng.uniform()): consumes exactly one uniform. Throws specula::Error when empty.
  int32_t sample(Rng& rng) const;

 private:
  int64_t vocab_size_ = 0;
  bool dense_ = false;
  int64_t support_size_ = 0;
  double total_ = 0.0;         // sum of probs_ after normalization (1 up to rounding)
  std::vector<int32_t> ids_;   // sparse only: ascending
  std::vector<double> probs_;  // dense: [vocab_size]; sparse: parallel to ids_
};

}  // namespace specula
