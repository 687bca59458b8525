// SamplingParams: defaults from generation_config (HF resolution), per-call overrides, validation
// messages that name the field and the allowed range.
#include "specula/sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "error_of.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using test::error_of;

void expect_invalid(const SamplingParams& p, const std::string& field, const std::string& range) {
  const std::string msg = error_of([&] { validate(p); });
  EXPECT_NE(msg.find(field), std::string::npos) << msg;
  EXPECT_NE(msg.find(range), std::string::npos) << msg;
}

TEST(SampleParams, Gemma4GenerationConfig) {
  GenerationConfig g;
  g.do_sample = true;
  g.temperature = 1.0;
  g.top_k = 64;
  g.top_p = 0.95;
  g.suppress_tokens = {258883, 258882};
  const SamplingParams p = sampling_params_from_generation_config(g);
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_k, 64);
  EXPECT_EQ(p.top_p, 0.95);
  EXPECT_EQ(p.min_p, 0.0);
  EXPECT_EQ(p.repetition_penalty, 1.0);
  EXPECT_EQ(p.suppress_tokens, (std::vector<int32_t>{258883, 258882}));
  EXPECT_FALSE(p.greedy());
  EXPECT_TRUE(p.has_filters());
}

TEST(SampleParams, DoSampleAbsentOrFalseIsGreedyLikeHF) {
  GenerationConfig g;
  g.temperature = 0.7;
  g.top_k = 10;
  EXPECT_TRUE(sampling_params_from_generation_config(g).greedy());
  g.do_sample = false;
  EXPECT_TRUE(sampling_params_from_generation_config(g).greedy());
  g.repetition_penalty = 1.3;  // processors still apply when greedy
  EXPECT_EQ(sampling_params_from_generation_config(g).repetition_penalty, 1.3);
}

TEST(SampleParams, DoSampleWithAbsentFieldsTakesHFBuiltInDefaults) {
  GenerationConfig g;
  g.do_sample = true;
  const SamplingParams p = sampling_params_from_generation_config(g);
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_k, 50);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.min_p, 0.0);
  g.top_p = 0.0;  // the MLX stacks' "off"
  g.min_p = 0.05;
  const SamplingParams q = sampling_params_from_generation_config(g);
  EXPECT_EQ(q.top_p, 1.0);
  EXPECT_EQ(q.min_p, 0.05);
}

TEST(SampleParams, OverridesWinOverDefaults) {
  GenerationConfig g;
  g.do_sample = true;
  g.temperature = 1.0;
  g.top_k = 64;
  const SamplingParams base = sampling_params_from_generation_config(g);

  SamplingOverrides o;
  o.temperature = 0.5;
  o.top_p = 0.9;
  o.seed = 17;
  o.logit_bias = std::map<int32_t, double>{{5, -1.5}};
  o.presence_penalty = 0.5;
  const SamplingParams p = apply_overrides(base, o);
  EXPECT_EQ(p.temperature, 0.5);
  EXPECT_EQ(p.top_k, 64);  // not overridden
  EXPECT_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.seed, 17u);
  EXPECT_EQ(p.logit_bias.at(5), -1.5);
  EXPECT_EQ(p.presence_penalty, 0.5);

  SamplingOverrides greedy;
  greedy.do_sample = false;
  EXPECT_TRUE(apply_overrides(base, greedy).greedy());

  // A greedy default becomes sampling at temperature 1 with do_sample, or at an explicit temperature.
  const SamplingParams greedy_base = sampling_params_from_generation_config(GenerationConfig{});
  SamplingOverrides sample;
  sample.do_sample = true;
  EXPECT_EQ(apply_overrides(greedy_base, sample).temperature, 1.0);
  SamplingOverrides warm;
  warm.temperature = 0.8;
  EXPECT_EQ(apply_overrides(greedy_base, warm).temperature, 0.8);
}

TEST(SampleParams, ValidationNamesFieldAndRange) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  SamplingParams p;
  p.temperature = -0.1;
  expect_invalid(p, "temperature = -0.1", ">= 0");
  p.temperature = nan;
  expect_invalid(p, "temperature", ">= 0");
  p = {};
  p.top_k = -1;
  expect_invalid(p, "top_k = -1", ">= 0");
  p = {};
  p.top_p = 0.0;
  expect_invalid(p, "top_p = 0", "(0, 1]");
  p.top_p = 1.5;
  expect_invalid(p, "top_p = 1.5", "(0, 1]");
  p = {};
  p.min_p = -0.5;
  expect_invalid(p, "min_p = -0.5", "[0, 1]");
  p.min_p = 2;
  expect_invalid(p, "min_p = 2", "[0, 1]");
  p = {};
  p.repetition_penalty = 0.0;
  expect_invalid(p, "repetition_penalty = 0", "> 0");
  p = {};
  p.presence_penalty = 3;
  expect_invalid(p, "presence_penalty = 3", "[-2, 2]");
  p = {};
  p.frequency_penalty = -2.5;
  expect_invalid(p, "frequency_penalty = -2.5", "[-2, 2]");
  p = {};
  p.logit_bias = {{3, nan}};
  expect_invalid(p, "logit_bias[3]", "-inf");
  p.logit_bias = {{3, std::numeric_limits<double>::infinity()}};
  expect_invalid(p, "logit_bias[3]", "-inf");
  p.logit_bias = {{-1, 1.0}};
  expect_invalid(p, "logit_bias token id -1", "negative");
  p = {};
  p.suppress_tokens = {-4};
  expect_invalid(p, "suppress_tokens", "-4");

  // Boundary values are accepted.
  p = {};
  p.temperature = 0.0;
  p.top_p = 1.0;
  p.min_p = 1.0;
  p.presence_penalty = -2.0;
  p.frequency_penalty = 2.0;
  p.logit_bias = {{0, -std::numeric_limits<double>::infinity()}};
  EXPECT_NO_THROW(validate(p));

  SamplingOverrides bad;
  bad.top_p = 2.0;
  EXPECT_NE(error_of([&] { apply_overrides(SamplingParams{}, bad); }).find("top_p = 2"), std::string::npos);
}

TEST(SampleParams, VocabularyChecksNameTheId) {
  SamplingParams p;
  p.suppress_tokens = {258883};
  std::string msg = error_of([&] { validate_for_vocab(p, 1000); });
  EXPECT_NE(msg.find("suppress_tokens token id 258883"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0 to 999"), std::string::npos) << msg;
  p = {};
  p.logit_bias = {{1000, 1.0}};
  msg = error_of([&] { validate_for_vocab(p, 1000); });
  EXPECT_NE(msg.find("logit_bias token id 1000"), std::string::npos) << msg;
  p.logit_bias = {{999, 1.0}};
  EXPECT_NO_THROW(validate_for_vocab(p, 1000));
}

}  // namespace
}  // namespace specula
