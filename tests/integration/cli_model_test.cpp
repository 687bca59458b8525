// `specula logits` and `specula run` driven through the real binary: JSON shapes, agreement with
// the golden expectations, and exit codes (0 ok, 1 runtime error, 2 usage error).
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "cli_runner.h"
#include "spec_golden_util.h"

#include "specula/io/config.h"

namespace specula {
namespace {

using Result = specula::test::CliResult;
using spec_test::kE4bLikeQ4Case;
using specula::test::run_cli;

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s.push_back(',');
    s.append(std::to_string(ids[i]));
  }
  return s;
}

TEST(CliModel, LogitsJsonMatchesGolden) {
  const nlohmann::json expected = read_json_file(kE4bLikeQ4Case + "/expected.json");
  const auto prompt = expected.at("prompt").get<std::vector<int32_t>>();
  const auto want = expected.at("logits").get<std::vector<std::vector<double>>>();
  const Result r =
      run_cli("logits --model " + kE4bLikeQ4Case + "/model --tokens " + join(prompt) + " --json --threads 1");
  ASSERT_EQ(r.code, 0);
  const nlohmann::json got = nlohmann::json::parse(r.out);
  const auto logits = got.at("logits").get<std::vector<std::vector<double>>>();
  ASSERT_EQ(logits.size(), prompt.size());
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(logits[i].size(), want[i].size());
    for (size_t j = 0; j < want[i].size(); ++j) {
      max_abs = std::max(max_abs, std::abs(want[i][j]));
      max_diff = std::max(max_diff, std::abs(want[i][j] - logits[i][j]));
    }
  }
  EXPECT_LT(max_diff / max_abs, 1e-4);
}

TEST(CliModel, RunJsonGivesGreedyTokensAndStats) {
  const nlohmann::json expected = read_json_file(kE4bLikeQ4Case + "/expected.json");
  const auto prompt = expected.at("prompt").get<std::vector<int32_t>>();
  const auto greedy = expected.at("greedy").get<std::vector<int32_t>>();
  const Result r = run_cli("run --model " + kE4bLikeQ4Case + "/model --tokens " + join(prompt) +
                           " --max-tokens 24 --ignore-eos --json --threads 1 --prefill-chunk 3");
  ASSERT_EQ(r.code, 0);
  const nlohmann::json got = nlohmann::json::parse(r.out);
  EXPECT_EQ(got.at("tokens").get<std::vector<int32_t>>(), greedy);
  const nlohmann::json& s = got.at("stats");
  EXPECT_EQ(s.at("prompt_tokens").get<int64_t>(), static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(s.at("generated_tokens").get<int64_t>(), 24);
  for (const char* k : {"prefill_ms", "decode_ms", "decode_tok_per_s", "load_ms"})
    EXPECT_TRUE(s.at(k).is_number()) << k;
}

TEST(CliModel, RunTextPrintsIds) {
  const Result r =
      run_cli("run --model " + kE4bLikeQ4Case + "/model --tokens 2,10,20 --max-tokens 3 --ignore-eos --threads 1");
  ASSERT_EQ(r.code, 0);
  int a, b, c;
  EXPECT_EQ(std::sscanf(r.out.c_str(), "%d,%d,%d", &a, &b, &c), 3) << r.out;
}

TEST(CliModel, ExitCodes) {
  // Token id past the vocabulary: runtime error.
  EXPECT_EQ(run_cli("run --model " + kE4bLikeQ4Case + "/model --tokens 2,99999 --max-tokens 1").code, 1);
  // Malformed token list and missing options: usage errors.
  EXPECT_EQ(run_cli("logits --model " + kE4bLikeQ4Case + "/model --tokens 2,x").code, 2);
  EXPECT_EQ(run_cli("run --tokens 2,3").code, 2);
  // Missing model directory: runtime error.
  EXPECT_EQ(run_cli("logits --model /nonexistent/specula --tokens 2").code, 1);
}

}  // namespace
}  // namespace specula
