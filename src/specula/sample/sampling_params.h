#pragma once
// Sampling parameters of one generation: their defaults (from a checkpoint's generation_config.json,
// docs/gemma4.md §2.5), per-call overrides and validation. The logits pipeline that uses them is
// logits_pipeline.h.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "specula/io/config.h"

namespace specula {

struct SamplingParams {
  double temperature = 1.0;              // >= 0; 0 = greedy (argmax, top_k/top_p/min_p ignored)
  int top_k = 0;                         // >= 0; 0 = off
  double top_p = 1.0;                    // (0, 1]; 1 = off
  double min_p = 0.0;                    // [0, 1]; 0 = off
  double repetition_penalty = 1.0;       // > 0; 1 = off (HF semantics, over prompt + generated tokens)
  double presence_penalty = 0.0;         // [-2, 2]; 0 = off (OpenAI semantics, over generated tokens)
  double frequency_penalty = 0.0;        // [-2, 2]; 0 = off (OpenAI semantics, over generated tokens)
  std::map<int32_t, double> logit_bias;  // token id -> additive bias (-inf bans the token)
  std::vector<int32_t> suppress_tokens;  // logits set to -inf
  uint64_t seed = 0;

  bool greedy() const { return temperature == 0.0; }
  // True when a filter may cut the distribution (the result may be sparse).
  bool has_filters() const { return !greedy() && (top_k > 0 || top_p < 1.0 || min_p > 0.0); }
};

// Per-call overrides; an engaged field wins over the defaults. `do_sample = false` forces greedy;
// `do_sample = true` without a temperature keeps the default temperature (1.0 if that is greedy).
struct SamplingOverrides {
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<double> presence_penalty;
  std::optional<double> frequency_penalty;
  std::optional<std::map<int32_t, double>> logit_bias;
  std::optional<std::vector<int32_t>> suppress_tokens;
  std::optional<uint64_t> seed;
};

// Defaults as Hugging Face resolves a generation_config.json: `do_sample` absent or false -> greedy
// (temperature 0); with `do_sample: true`, absent fields take HF's built-in defaults (temperature
// 1.0, top_k 50, top_p 1.0, no min_p, repetition_penalty 1.0). suppress_tokens are copied. A
// `top_p` of 0 (the MLX stacks' "off") is read as off (1.0). Validates the result.
SamplingParams sampling_params_from_generation_config(const GenerationConfig& config);

// `base` with every engaged override applied, validated.
SamplingParams apply_overrides(SamplingParams base, const SamplingOverrides& overrides);

// Throws specula::Error naming the first invalid field, its value and the allowed range.
void validate(const SamplingParams& params);

// Also checks that every token id in logit_bias / suppress_tokens lies in [0, vocab_size).
void validate_for_vocab(const SamplingParams& params, int64_t vocab_size);

}  // namespace specula
