// The EOS set (docs/gemma4.md §2.5): config ∪ generation_config ∪ the tokenizer's eos token ∪ the
// chat template's end-of-turn token, with the real Gemma 4 tokenizer and chat templates.
#include "specula/engine/eos_tokens.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gemma_tokenizer.h"
#include "specula/io/eos_set.h"
#include "specula/text/chat_template.h"

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
  const std::vector<int32_t> set =
      eos_token_set({}, nullptr, tokenizer_eos_ids(tok, tokenizer_special_tokens(test::gemma_tokenizer_dir()), &gemma4));
  EXPECT_EQ(set, (std::vector<int32_t>{1, 106}));
}

}  // namespace
}  // namespace specula
