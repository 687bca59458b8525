#pragma once
// The speculative-decoding and sampling options of `specula run` (--draft, --gamma,
// --drafter-compat, --temperature, --top-k, --top-p, --min-p, --seed, --trace) and the run itself:
// plain decoding is the gamma 0 case of the same speculative session.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/text_prompt.h"
#include "specula/grammar/token_constraint.h"
#include "specula/model/target_model.h"

namespace specula::cli {

struct SpeculativeRunArgs {
  std::string draft;           // drafter checkpoint directory, "lookup", or empty (none)
  std::string gamma = "auto";  // N or "auto"
  std::string drafter_compat = "ollama";
  std::string draft_quant = "auto";
  std::string draft_head = "stored";
  std::optional<double> temperature;  // absent = greedy
  std::optional<int> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<uint64_t> seed;  // absent = a fresh random seed, reported in the statistics
  bool trace = false;
};

// The plain-run arguments run.cpp already has.
struct RunBasics {
  std::string model;
  std::string tokens;
  int64_t max_tokens = 128;
  bool ignore_eos = false;
  bool json = false;
  int threads = 0;
  int64_t prefill_chunk = kDefaultPrefillChunk;
  int64_t max_context = 0;
  std::string precision = "fast";                  // --precision: "fast", "exact" or "int8"
  std::string kv_type = "f32";                     // --kv-type: "f32", "bf16" or "q8"
  std::optional<std::vector<int32_t>> prompt_ids;  // text mode: the encoded prompt (instead of tokens)
  grammar::TokenConstraint constraint;             // --json-schema / --grammar
  std::vector<int32_t> tokenizer_eos_ids;          // text mode: the tokenizer side of the EOS set
};

void add_speculative_options(CLI::App* cmd, SpeculativeRunArgs& args);

// Generates with the draft source (or plain sampling when there is none) and prints like
// `specula run`, plus the speculative statistics (and the rounds with --trace) in --json. With
// `text` (text mode) the generated text streams through it and --json adds "text".
void run_speculative(const RunBasics& basics, const SpeculativeRunArgs& args, TextOutput* text = nullptr);

}  // namespace specula::cli
