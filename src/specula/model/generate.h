#pragma once
// Plain greedy generation on the target model: prefill the prompt (in chunks), then one token per
// forward, argmax with lowest-id tie-break. Stops at the EOS set (config ∪ generation_config,
// docs/gemma4.md §2.5) unless ignore_eos; the EOS token itself is not part of the output.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "specula/model/target_model.h"

namespace specula {

struct GenerateOptions {
  int64_t max_tokens = 128;
  bool ignore_eos = false;
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_ms = 0.0;
  double decode_ms = 0.0;  // every forward after the prefill
  double prefill_tok_per_s() const { return prefill_ms > 0 ? prompt_tokens * 1000.0 / prefill_ms : 0.0; }
  // Tokens produced by decode forwards (the first token comes from the prefill).
  double decode_tok_per_s() const {
    return decode_ms > 0 && generated_tokens > 1 ? (generated_tokens - 1) * 1000.0 / decode_ms : 0.0;
  }
};

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string stop_reason;  // "eos", "max_tokens" or "context" (the context limit was reached)
  GenerateStats stats;
};

// Generates on a fresh state of `cache` (it is reset first). on_token, if set, is called with each
// emitted token; returning false stops generation (stop_reason "callback").
GenerateResult generate_greedy(const TargetModel& model, TargetCache& cache, std::span<const int32_t> prompt,
                               const GenerateOptions& options, ThreadPool& pool,
                               const std::function<bool(int32_t)>& on_token = {});

}  // namespace specula
