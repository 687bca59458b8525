#include "specula/sample/sampler.h"

namespace specula {

SampledToken sample_token(std::span<const float> logits, const TokenHistory& history, const SamplingParams& params,
                          Rng& rng, AllowedTokens allowed) {
  ProcessedDistribution d = build_distribution(logits, history, params, allowed);
  SampledToken out;
  out.issues = d.issues;
  // A greedy or fully masked step is a point mass: no randomness needed.
  out.id = params.greedy() || d.issues.all_masked ? d.p.argmax() : d.p.sample(rng);
  return out;
}

}  // namespace specula
