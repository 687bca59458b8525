#include "specula/sample/sampling_params.h"

#include <cmath>

#include "specula/util/error.h"

namespace specula {

SamplingParams sampling_params_from_generation_config(const GenerationConfig& config) {
  SamplingParams p;
  const bool do_sample = config.do_sample.value_or(false);
  if (do_sample) {
    p.temperature = config.temperature.value_or(1.0);
    p.top_k = config.top_k.value_or(50);
    p.top_p = config.top_p.value_or(1.0);
    if (p.top_p == 0.0) p.top_p = 1.0;
    p.min_p = config.min_p.value_or(0.0);
  } else {
    p.temperature = 0.0;
  }
  // Processors (not warpers): HF applies them in greedy mode too.
  p.repetition_penalty = config.repetition_penalty.value_or(1.0);
  p.suppress_tokens.assign(config.suppress_tokens.begin(), config.suppress_tokens.end());
  validate(p);
  return p;
}

SamplingParams apply_overrides(SamplingParams base, const SamplingOverrides& o) {
  if (o.do_sample) {
    if (!*o.do_sample) {
      base.temperature = 0.0;
    } else if (base.temperature == 0.0) {
      base.temperature = 1.0;
    }
  }
  if (o.temperature) base.temperature = *o.temperature;
  if (o.top_k) base.top_k = *o.top_k;
  if (o.top_p) base.top_p = *o.top_p;
  if (o.min_p) base.min_p = *o.min_p;
  if (o.repetition_penalty) base.repetition_penalty = *o.repetition_penalty;
  if (o.presence_penalty) base.presence_penalty = *o.presence_penalty;
  if (o.frequency_penalty) base.frequency_penalty = *o.frequency_penalty;
  if (o.logit_bias) base.logit_bias = *o.logit_bias;
  if (o.suppress_tokens) base.suppress_tokens = *o.suppress_tokens;
  if (o.seed) base.seed = *o.seed;
  validate(base);
  return base;
}

void validate(const SamplingParams& p) {
  // Written as negated "allowed" conditions so that NaN is rejected everywhere.
  if (!(std::isfinite(p.temperature) && p.temperature >= 0.0))
    fail("sampling: temperature = {} is out of range (allowed: finite, >= 0; 0 = greedy)", p.temperature);
  if (p.top_k < 0) fail("sampling: top_k = {} is out of range (allowed: >= 0; 0 = off)", p.top_k);
  if (!(p.top_p > 0.0 && p.top_p <= 1.0))
    fail("sampling: top_p = {} is out of range (allowed: (0, 1]; 1 = off)", p.top_p);
  if (!(p.min_p >= 0.0 && p.min_p <= 1.0))
    fail("sampling: min_p = {} is out of range (allowed: [0, 1]; 0 = off)", p.min_p);
  if (!(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0))
    fail("sampling: repetition_penalty = {} is out of range (allowed: finite, > 0; 1 = off)", p.repetition_penalty);
  if (!(p.presence_penalty >= -2.0 && p.presence_penalty <= 2.0))
    fail("sampling: presence_penalty = {} is out of range (allowed: [-2, 2]; 0 = off)", p.presence_penalty);
  if (!(p.frequency_penalty >= -2.0 && p.frequency_penalty <= 2.0))
    fail("sampling: frequency_penalty = {} is out of range (allowed: [-2, 2]; 0 = off)", p.frequency_penalty);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0) fail("sampling: logit_bias token id {} is negative", id);
    if (std::isnan(bias) || (std::isinf(bias) && bias > 0))
      fail("sampling: logit_bias[{}] = {} is out of range (allowed: finite, or -inf to ban the token)", id, bias);
  }
  for (const int32_t id : p.suppress_tokens) {
    if (id < 0) fail("sampling: suppress_tokens contains the negative token id {}", id);
  }
}

void validate_for_vocab(const SamplingParams& p, int64_t vocab_size) {
  validate(p);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id >= vocab_size)
      fail("sampling: logit_bias token id {} is outside the vocabulary (allowed: 0 to {})", id, vocab_size - 1);
  }
  for (const int32_t id : p.suppress_tokens) {
    if (id >= vocab_size)
      fail("sampling: suppress_tokens token id {} is outside the vocabulary (allowed: 0 to {})", id, vocab_size - 1);
  }
}

}  // namespace specula
