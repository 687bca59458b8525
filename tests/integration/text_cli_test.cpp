// `specula run` with text prompts, driven through the real binary on a synthetic checkpoint that
// carries the Gemma 4 test tokenizer (`specula synth --tokenizer`): the streamed text and the
// --json text equal the detokenized tokens, the prompt holds exactly one <bos> (raw and chat),
// plain and speculative decoding give the same tokens, and the error paths (no tokenizer.json,
// a vocabulary too small for the tokenizer, conflicting options) exit with the right codes.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/wait.h>
#include "cli_runner.h"
#include "shared_checkpoint.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

using Result = specula::test::CliResult;
using specula::test::run_cli;

const std::string kTokenizerDir = std::string(SPECULA_TEST_DATA) + "/tokenizer-gemma4";

class TextCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "specula-text-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string model() { return specula::test::shared_text_pair().model; }
  static std::string drafter() { return specula::test::shared_text_pair().drafter; }

  // The text `specula detokenize` makes of `ids` (special tokens skipped, as the stream does).
  static std::string detokenize(const std::vector<int32_t>& ids) {
    const Result r =
        run_cli("detokenize --model " + model() + " --skip-special --json --ids '" + nlohmann::json(ids).dump() + "'");
    EXPECT_EQ(r.code, 0);
    return nlohmann::json::parse(r.out).at("text").get<std::string>();
  }

  static nlohmann::json run_json(const std::string& args) {
    const Result r = run_cli("run --model " + model() + " " + args + " --json --threads 1");
    EXPECT_EQ(r.code, 0) << args;
    return nlohmann::json::parse(r.out);
  }

  static std::string dir_;
};

std::string TextCli::dir_;

TEST_F(TextCli, SynthCopiesTheTokenizerFiles) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    EXPECT_EQ(fs::file_size(model() + "/" + name), fs::file_size(kTokenizerDir + "/" + name)) << name;
  }
}

TEST_F(TextCli, RawPromptStreamsTheDetokenizedTextWithOneBos) {
  const std::string args = "--prompt 'The capital of France is' --max-tokens 12 --ignore-eos";
  const Result streamed = run_cli("run --model " + model() + " " + args + " --threads 1");
  ASSERT_EQ(streamed.code, 0);
  const nlohmann::json doc = run_json(args);
  const auto tokens = doc.at("tokens").get<std::vector<int32_t>>();
  ASSERT_EQ(tokens.size(), 12u);
  const std::string text = detokenize(tokens);
  EXPECT_EQ(doc.at("text").get<std::string>(), text);
  EXPECT_EQ(streamed.out, text + "\n");

  // The prompt is the tokenizer's encoding with special tokens: a single leading <bos>.
  const Result ids = run_cli("tokenize --model " + model() + " --text 'The capital of France is'");
  ASSERT_EQ(ids.code, 0);
  const auto prompt = nlohmann::json::parse(ids.out).get<std::vector<int32_t>>();
  ASSERT_FALSE(prompt.empty());
  EXPECT_EQ(prompt.front(), 2);
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), 2), 1);
  EXPECT_EQ(doc.at("stats").at("prompt_tokens").get<size_t>(), prompt.size());
}

TEST_F(TextCli, ChatPromptIsTheRenderedTemplateWithOneBos) {
  const nlohmann::json doc = run_json("--chat --system 'Answer briefly.' --prompt 'Hi there' --max-tokens 8");
  const auto tokens = doc.at("tokens").get<std::vector<int32_t>>();
  EXPECT_EQ(doc.at("text").get<std::string>(), detokenize(tokens));

  const std::string messages_file = dir_ + "/messages.json";
  std::ofstream(messages_file) << R"([{"role": "system", "content": "Answer briefly."},)"
                               << R"( {"role": "user", "content": "Hi there"}])";
  const Result rendered = run_cli("render --model " + model() + " --messages " + messages_file);
  ASSERT_EQ(rendered.code, 0);
  const std::string prompt_file = dir_ + "/prompt.txt";
  std::ofstream(prompt_file, std::ios::binary) << rendered.out;
  const Result ids = run_cli("tokenize --model " + model() + " --no-special < " + prompt_file);
  ASSERT_EQ(ids.code, 0);
  const auto prompt = nlohmann::json::parse(ids.out).get<std::vector<int32_t>>();
  ASSERT_FALSE(prompt.empty());
  EXPECT_EQ(prompt.front(), 2);  // the template writes <bos>; encoding must not add a second
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), 2), 1);
  EXPECT_EQ(doc.at("stats").at("prompt_tokens").get<size_t>(), prompt.size());
}

TEST_F(TextCli, SpeculativeGivesThePlainTokensAndText) {
  const std::string args = "--chat --prompt 'Count to five' --max-tokens 10 --ignore-eos";
  const nlohmann::json plain = run_json(args);
  const nlohmann::json spec = run_json(args + " --draft " + drafter() + " --gamma 3");
  EXPECT_EQ(spec.at("tokens"), plain.at("tokens"));
  EXPECT_EQ(spec.at("text"), plain.at("text"));
  EXPECT_EQ(spec.at("stats").at("draft").get<std::string>(), drafter());
  // The streamed text of the speculative path too.
  const Result streamed = run_cli("run --model " + model() + " " + args + " --draft " + drafter() + " --threads 1");
  ASSERT_EQ(streamed.code, 0);
  EXPECT_EQ(streamed.out, plain.at("text").get<std::string>() + "\n");
}

TEST_F(TextCli, CheckpointWithoutTokenizerTakesTokensButNotText) {
  const std::string bare = dir_ + "/bare";
  ASSERT_EQ(run_cli("synth --preset tiny-dense --out " + bare).code, 0);
  const Result ids = run_cli("run --model " + bare + " --tokens 2,10,20 --max-tokens 3 --ignore-eos --threads 1");
  EXPECT_EQ(ids.code, 0);
  EXPECT_EQ(std::count(ids.out.begin(), ids.out.end(), ','), 2);  // three ids
  const Result text = run_cli("run --model " + bare + " --prompt hello --threads 1", /*merge_stderr=*/true);
  EXPECT_EQ(text.code, 1);
  EXPECT_NE(text.out.find(bare + "/tokenizer.json not found"), std::string::npos) << text.out;
}

TEST_F(TextCli, UsageErrors) {
  EXPECT_EQ(run_cli("run --model " + model()).code, 2);                             // no prompt at all
  EXPECT_EQ(run_cli("run --model " + model() + " --tokens 2 --prompt x").code, 2);  // both
  EXPECT_EQ(run_cli("run --model " + model() + " --chat").code, 2);                 // --chat without --prompt
  EXPECT_EQ(run_cli("run --model " + model() + " --prompt x --system y").code, 2);  // --system without --chat
}

TEST_F(TextCli, SynthRejectsAVocabularySmallerThanTheTokenizer) {
  const Result r = run_cli("synth --preset tiny-dense --tokenizer " + kTokenizerDir + " --out " + dir_ + "/small",
                           /*merge_stderr=*/true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--vocab 262144"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ + "/small/model.safetensors"));
}

}  // namespace
