#pragma once
// Lossless speculative sampling (docs/gemma4.md §8; Leviathan et al. 2023, Chen et al. 2023):
// a draft token x drawn from the drafter's distribution q is accepted with probability
// min(1, p(x)/q(x)), where p is the target's exact sampling distribution (build_distribution); on
// rejection the token is resampled from the residual normalize(max(0, p - q)). The emitted token is
// then distributed exactly as p. With greedy p and q (point masses) this reduces to "accept iff the
// draft equals the target's argmax, else emit the argmax".
#include <cstdint>
#include <span>

#include "specula/sample/rng.h"
#include "specula/sample/token_distribution.h"

namespace specula {

// The drafter's q over a candidate set (e.g. the centroid head's candidates): softmax of
// scores / temperature over `ids`, zero elsewhere. temperature 0 -> point mass on the best score
// (lowest id on ties). NaN scores count as -inf; if no score is finite or +inf, the point mass
// falls on the lowest candidate id. Throws for empty/mismatched input, duplicate or
// out-of-vocabulary ids, negative or non-finite temperature.
TokenDistribution candidate_distribution(int64_t vocab_size, std::span<const int32_t> ids,
                                         std::span<const float> scores, double temperature);

// Accept/reject of draft x: draws exactly one rng.uniform() u and accepts iff u < p(x) / q(x)
// (always when p(x) >= q(x), never when p(x) = 0). Throws if q(x) = 0 (x cannot have been drawn
// from q) or p and q have different vocabulary sizes.
bool accept_draft(int32_t x, const TokenDistribution& p, const TokenDistribution& q, Rng& rng);

// normalize(max(0, p - q)); when that is all zero (p <= q everywhere, only possible through
// rounding once a rejection happened) the defined fallback is p itself. Sparse if p is sparse.
TokenDistribution residual_distribution(const TokenDistribution& p, const TokenDistribution& q);

struct DraftVerdict {
  bool accepted = false;
  int32_t token = 0;  // x if accepted, else the resampled token
};

// accept_draft, then on rejection one draw from residual_distribution(p, q) (one more uniform).
DraftVerdict verify_draft(int32_t x, const TokenDistribution& p, const TokenDistribution& q, Rng& rng);

}  // namespace specula
