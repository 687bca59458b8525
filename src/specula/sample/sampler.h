#pragma once
// One decoding step of plain generation: logits -> distribution (logits_pipeline.h) -> token.
#include <cstdint>
#include <span>

#include "specula/sample/logits_pipeline.h"
#include "specula/sample/rng.h"

namespace specula {

struct SampledToken {
  int32_t id = 0;
  LogitsIssues issues;
};

// Greedy (temperature 0): the argmax of the processed logits, lowest id on ties; draws nothing
// from `rng`. Otherwise one draw from build_distribution's p: consumes exactly one rng.uniform().
// `allowed`: the constraint's token mask (logits_pipeline.h), empty for none.
SampledToken sample_token(std::span<const float> logits, const TokenHistory& history, const SamplingParams& params,
                          Rng& rng, AllowedTokens allowed = {});

}  // namespace specula
