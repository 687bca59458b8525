#pragma once
// `specula bench --draft DIR`: the speculative-decoding measurements (spec/draft_benchmark.h).
#include <string>
#include <vector>

namespace specula::cli {

struct DraftBenchArgs {
  std::string draft_dir;
  int64_t prompt_tokens = 256;
  int64_t generate_tokens = 64;
  int64_t repeats = 8;
  bool costs_only = false;  // skip the (slow) controlled-acceptance runs
};

// Measures drafter-step and verify costs (and, unless costs_only, controlled-acceptance runs) of
// `model_dir` + `args.draft_dir` for each thread count; prints a markdown table and returns it.
std::string run_draft_bench(const std::string& model_dir, const DraftBenchArgs& args, const std::vector<int>& threads);

}  // namespace specula::cli
