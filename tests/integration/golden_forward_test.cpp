// Every golden case (tests/data/goldens/<case>): the prompt's prefill logits within 1e-4 relative
// error (max |diff| / max |expected| over the whole [len][vocab] array) of the float64 reference,
// and the 24 greedy tokens (EOS ignored) identical.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "specula/io/config.h"
#include "specula/model/generate.h"
#include "specula/model/target_model.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> golden_cases() {
  std::vector<std::string> cases;
  const fs::path root = fs::path(SPECULA_TEST_DATA) / "goldens";
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory() && fs::exists(e.path() / "expected.json")) cases.push_back(e.path().filename().string());
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

class GoldenForward : public ::testing::TestWithParam<std::string> {};

TEST(GoldenCases, Present) { EXPECT_GE(golden_cases().size(), 12u); }

TEST_P(GoldenForward, PrefillLogitsAndGreedyTokens) {
  const fs::path dir = fs::path(SPECULA_TEST_DATA) / "goldens" / GetParam();
  const nlohmann::json expected = read_json_file((dir / "expected.json").string());
  const std::vector<int32_t> prompt = expected.at("prompt").get<std::vector<int32_t>>();
  const auto want_logits = expected.at("logits").get<std::vector<std::vector<double>>>();
  const std::vector<int32_t> want_greedy = expected.at("greedy").get<std::vector<int32_t>>();

  auto model = TargetModel::load((dir / "model").string());
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  ForwardRequest all;
  all.rows = OutputRows::All;
  const ForwardOutput out = model->forward(cache, prompt, all, pool);
  ASSERT_EQ(want_logits.size(), prompt.size());
  ASSERT_EQ(out.rows.size(), prompt.size());
  double max_abs = 0.0, max_diff = 0.0;
  for (size_t r = 0; r < prompt.size(); ++r) {
    ASSERT_EQ(static_cast<int64_t>(want_logits[r].size()), out.vocab_size);
    const float* got = out.logits_row(r);
    for (int64_t j = 0; j < out.vocab_size; ++j) {
      max_abs = std::max(max_abs, std::abs(want_logits[r][static_cast<size_t>(j)]));
      max_diff = std::max(max_diff, std::abs(static_cast<double>(got[j]) - want_logits[r][static_cast<size_t>(j)]));
    }
  }
  const double rel = max_diff / max_abs;
  RecordProperty("max_relative_error", std::to_string(rel));
  std::printf("[golden] %-24s max relative error %.3e\n", GetParam().c_str(), rel);
  EXPECT_LT(rel, 1e-4) << GetParam();

  GenerateOptions opts;
  opts.max_tokens = static_cast<int64_t>(want_greedy.size());
  opts.ignore_eos = true;
  const GenerateResult res = generate_greedy(*model, cache, prompt, opts, pool);
  EXPECT_EQ(res.tokens, want_greedy) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Goldens, GoldenForward, ::testing::ValuesIn(golden_cases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace specula
