// The EOS set (docs/gemma4.md §2.5): config ∪ generation_config ∪ the tokenizer's eos token ∪ the
// chat template's end-of-turn token, with the real Gemma 4 tokenizer and chat templates; a target
// whose config lists no EOS (as the 12B's) stops at <turn|> once loaded with the tokenizer side.
// And the default sampling a Gemma 4 IT generation_config.json gives.
#include "specula/engine/eos_tokens.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gemma_tokenizer.h"
#include "specula/io/eos_set.h"
#include "specula/model/target_model.h"
#include "specula/sample/sampling_params.h"
#include "specula/synth/plan.h"
#include "specula/synth/writer.h"
#include "specula/text/chat_template.h"
#include "temp_dir.h"

namespace specula {
namespace {

ChatTemplate template_file(const std::string& name) {
  const std::string path = std::string(SPECULA_TEST_DATA) + "/chat-templates/" + name;
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return ChatTemplate(text.str(), path);
}

TEST(EosSet, UnionOfConfigAndGenerationConfigSortedAndUnique) {
  GenerationConfig g;
  g.eos_token_ids = {106, 1, 50};
  EXPECT_EQ(eos_token_set({1, 106}, &g), (std::vector<int32_t>{1, 50, 106}));
  EXPECT_EQ(eos_token_set({1, 106}, nullptr), (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(eos_token_set({}, nullptr, {106, 1}), (std::vector<int32_t>{1, 106}));
  EXPECT_TRUE(eos_token_set({}, nullptr).empty());
}

TEST(EosSet, TokenizerSideIsItsEosAndTheTemplatesEndOfTurn) {
  const text::Tokenizer& tok = test::gemma_tokenizer();
  const nlohmann::ordered_json special = tokenizer_special_tokens(test::gemma_tokenizer_dir());
  ASSERT_EQ(tok.token_to_id("<turn|>"), 106);
  ASSERT_EQ(tok.token_to_id("<eos>"), 1);
  const ChatTemplate gemma4 = template_file("google-gemma-4-31B-it.jinja");
  EXPECT_EQ(tokenizer_eos_ids(tok, special, &gemma4), (std::vector<int32_t>{1, 106}));
  // Without a template only the tokenizer's eos; a template without a Gemma end-of-turn adds nothing.
  EXPECT_EQ(tokenizer_eos_ids(tok, special, nullptr), (std::vector<int32_t>{1}));
  const ChatTemplate qwen = template_file("Qwen-Qwen2.5-7B-Instruct.jinja");
  EXPECT_EQ(tokenizer_eos_ids(tok, special, &qwen), (std::vector<int32_t>{1}));
  // No tokenizer_config.json: nothing from there.
  EXPECT_EQ(tokenizer_eos_ids(tok, nlohmann::ordered_json::object(), &gemma4), (std::vector<int32_t>{106}));
}

TEST(EosSet, ConfigWithoutEosStillStopsAtTheEndOfTurn) {
  // The 12B's config.json has no top-level eos_token_id; without generation_config.json the
  // tokenizer side is what ends a chat turn.
  const text::Tokenizer& tok = test::gemma_tokenizer();
  const ChatTemplate gemma4 = template_file("google-gemma-4-31B-it.jinja");
  const std::vector<int32_t> set = eos_token_set(
      {}, nullptr, tokenizer_eos_ids(tok, tokenizer_special_tokens(test::gemma_tokenizer_dir()), &gemma4));
  EXPECT_EQ(set, (std::vector<int32_t>{1, 106}));
}

TEST(EosSet, TargetLoadedWithTheTokenizerSideStopsAtTheEndOfTurn) {
  // A checkpoint laid out like the 12B's: no eos_token_id in config.json, no generation_config.json.
  const test::ScopedTempDir dir("specula-eos");
  synth::SynthOptions o;
  o.preset = "tiny-dense";
  synth::CheckpointPlan plan = synth::plan_target(o);
  plan.config.erase("eos_token_id");
  plan.config["text_config"].erase("eos_token_id");
  synth::write_checkpoint(plan, dir.path().string());
  std::filesystem::remove(dir.file("generation_config.json"));
  TargetOptions opts;
  opts.precision = Precision::Exact;
  EXPECT_TRUE(TargetModel::load(dir.path().string(), opts)->eos_token_ids().empty());
  const ChatTemplate gemma4 = template_file("google-gemma-4-31B-it.jinja");
  const std::vector<int32_t> tokenizer_side =
      tokenizer_eos_ids(test::gemma_tokenizer(), tokenizer_special_tokens(test::gemma_tokenizer_dir()), &gemma4);
  const auto model = load_target_with_eos(dir.path().string(), opts, tokenizer_side);
  EXPECT_EQ(model->eos_token_ids(), (std::vector<int32_t>{1, 106}));  // <eos>, <turn|>
}

TEST(GenerationDefaults, Gemma4ItGenerationConfig) {
  // synth writes generation_config.json with the keys and values of the Gemma 4 IT releases.
  synth::SynthOptions o;
  o.preset = "tiny-dense";
  o.vocab = 262144;
  const nlohmann::json g = synth::plan_target(o).generation_config;
  const SamplingParams d = sampling_params_from_generation_config(parse_generation_config(g, "generation_config.json"));
  EXPECT_EQ(d.temperature, 1.0);
  EXPECT_EQ(d.top_k, 64);
  EXPECT_EQ(d.top_p, 0.95);
  EXPECT_EQ(d.min_p, 0.0);
  EXPECT_EQ(d.suppress_tokens, (std::vector<int32_t>{258883, 258882}));
  // A request's own values win, field by field; unset ones keep the file's.
  SamplingOverrides r;
  r.top_k = 5;
  const SamplingParams p = apply_overrides(d, r);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_EQ(p.top_p, 0.95);
  EXPECT_EQ(p.temperature, 1.0);
}

}  // namespace
}  // namespace specula
