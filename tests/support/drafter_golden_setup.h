#pragma once
// Shared setup of the tests of what a drafter builds at load (affine copies, a candidate head): the
// golden cases with each drafter head, a case's target and drafter, the `specula run` command over
// it, and the check that speculative output still equals plain output.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "spec_golden_util.h"
#include "specula/io/config.h"
#include "specula/model/drafter.h"
#include "specula/model/generate.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"

namespace specula::spec_test {

// Golden cases whose drafter has a dense head and a centroid head.
inline const char* const kDenseHead = "dense-densehead-bf16";
inline const char* const kCentroidHead = "e4b-like-bf16-hf";

inline std::unique_ptr<TargetModel> load_golden_target(const std::string& name, Precision precision) {
  TargetOptions o;
  o.precision = precision;
  return TargetModel::load((golden_root() / name / "model").string(), o);
}

inline std::unique_ptr<Drafter> load_golden_drafter(const std::string& name, const TargetModel& model,
                                                    DrafterQuant quant, DrafterHead head = DrafterHead::Stored) {
  return Drafter::load((golden_root() / name / "drafter").string(), model, DrafterConvention::Ollama, quant, head);
}

// `run` over the case's prompt with its drafter: 16 tokens at γ 3 on one thread.
inline std::string golden_run_command(const std::string& name) {
  std::string tokens;
  for (int32_t t : golden_prompt(name)) {
    if (!tokens.empty()) tokens += ',';
    tokens += std::to_string(t);
  }
  const std::filesystem::path dir = golden_root() / name;
  return "run --model " + (dir / "model").string() + " --draft " + (dir / "drafter").string() +
         " --gamma 3 --max-tokens 16 --ignore-eos --threads 1 --tokens " + tokens;
}

// `run` over the case with `--<flag> <value>` names what was built (`note`) in its statistics line
// and prints the tokens `baseline_flags` give; `--<flag> <bad>` is a usage error naming the flag.
inline void expect_run_flag(const std::string& name, const std::string& baseline_flags, const std::string& flag,
                            const std::string& value, const std::string& note, const std::string& bad) {
  const std::string base = golden_run_command(name);
  const test::CliResult baseline = test::run_cli(base + baseline_flags);
  const test::CliResult built = test::run_cli(base + " --" + flag + " " + value, true);
  ASSERT_EQ(baseline.code, 0);
  ASSERT_EQ(built.code, 0) << built.out;
  EXPECT_NE(built.out.find(note), std::string::npos) << built.out;
  EXPECT_NE(built.out.find(baseline.out), std::string::npos) << "tokens differ:\n" << baseline.out << "\n" << built.out;
  const test::CliResult refused = test::run_cli(base + " --" + flag + " " + bad, true);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.out.find("--" + flag), std::string::npos) << refused.out;
}

// 24 tokens from the case's prompt, greedy, plainly and with the drafter at γ 3: the same tokens.
inline void expect_speculative_equals_plain(const std::string& name, const TargetModel& model, const Drafter& drafter) {
  const std::vector<int32_t> prompt = golden_prompt(name);
  ThreadPool pool(2);
  TargetCache cache = model.new_cache();
  GenerateOptions g;
  g.max_tokens = 24;
  g.ignore_eos = true;
  const std::vector<int32_t> plain = generate_greedy(model, cache, prompt, g, pool).tokens;
  SpeculativeOptions o;
  o.max_tokens = 24;
  o.ignore_eos = true;
  o.gamma.fixed = 3;
  const SpeculativeResult r = generate_speculative(model, cache, &drafter, prompt, o, pool);
  EXPECT_EQ(r.tokens, plain);
  EXPECT_GT(r.stats.drafted, 0);
}

}  // namespace specula::spec_test
