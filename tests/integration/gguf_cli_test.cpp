// GGUF files through the real binary: `synth --format gguf` writes one, `inspect` shows its ggml
// types, `run` generates from it (also as an Ollama blob named `ollama:NAME:TAG`), and a missing
// file is a runtime error (exit 1). With the Gemma 4 tokenizer written into the file, text mode
// runs from the single .gguf (its tokenizer and chat template); without one, text is refused
// naming the file and key. A drafter file runs beside the target.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "temp_dir.h"

namespace specula {
namespace {

using specula::test::run_cli;
using specula::test::run_shell;

TEST(GgufCli, SynthInspectAndRun) {
  const test::ScopedTempDir tmp("specula-gguf-cli");
  const std::string file = tmp.file("tiny.gguf");
  const auto synth = run_cli("synth --preset tiny-dense --format gguf --quant q4_0 --out " + file);
  ASSERT_EQ(synth.code, 0) << synth.out;
  EXPECT_NE(synth.out.find("GGUF, q4_0 matrices"), std::string::npos) << synth.out;

  const auto inspect = run_cli("inspect " + file + " --json");
  ASSERT_EQ(inspect.code, 0) << inspect.out;
  const nlohmann::json doc = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(doc.at("gguf").at("ggml_types").at("attn_q.weight").at("q4_0"), 6);  // every layer
  EXPECT_EQ(doc.at("gguf").at("ggml_types").at("attn_norm.weight").at("f32"), 6);

  const auto run = run_cli("run --model " + file +
                           " --tokens 2,17,99,5 --max-tokens 6 --ignore-eos --json "
                           "--threads 1 --precision exact");
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_EQ(nlohmann::json::parse(run.out).at("tokens").size(), 6u);

  // llama.cpp's Q4_K_M mixture; the tiny rows (64) take its fallbacks: Q8_0 where Q6_K would go
  // (layers 2 and 5 of 6), Q5_0 for Q4_K.
  const std::string mixed = tmp.file("tiny-q4_k_m.gguf");
  ASSERT_EQ(run_cli("synth --preset tiny-dense --format gguf --quant q4_k_m --out " + mixed).code, 0);
  const nlohmann::json types =
      nlohmann::json::parse(run_cli("inspect " + mixed + " --json").out).at("gguf").at("ggml_types");
  EXPECT_EQ(types.at("attn_v.weight"), (nlohmann::json{{"q5_0", 4}, {"q8_0", 2}}));
  EXPECT_EQ(types.at("token_embd.weight"), (nlohmann::json{{"q8_0", 1}}));
  EXPECT_EQ(run_cli("run --model " + mixed + " --tokens 2,17,99,5 --max-tokens 2 --threads 1").code, 0);

  const auto bad = run_cli("run --model " + tmp.path().string() + "/missing.gguf --tokens 2 --max-tokens 1");
  EXPECT_EQ(bad.code, 1);

  // The same file as Ollama stores it: a manifest naming the blob by digest (a made-up one: the
  // resolver does not hash the blob).
  namespace fs = std::filesystem;
  const fs::path store = tmp.path() / "ollama";
  const std::string digest(64, 'a');
  fs::create_directories(store / "blobs");
  fs::create_directories(store / "manifests/registry.ollama.ai/library/tiny");
  fs::copy_file(file, store / "blobs" / ("sha256-" + digest));
  std::ofstream(store / "manifests/registry.ollama.ai/library/tiny/q4") << nlohmann::json{
      {"schemaVersion", 2},
      {"layers", {{{"mediaType", "application/vnd.ollama.image.model"}, {"digest", "sha256:" + digest}}}}};
  const std::string env = "OLLAMA_MODELS=" + store.string() + " " + SPECULA_BINARY;
  const auto by_name = run_shell(env +
                                 " run --model ollama:tiny:q4 --tokens 2,17,99,5 --max-tokens 6 --ignore-eos --json "
                                 "--threads 1 --precision exact 2>/dev/null");
  ASSERT_EQ(by_name.code, 0) << by_name.out;
  EXPECT_EQ(nlohmann::json::parse(by_name.out).at("tokens"), nlohmann::json::parse(run.out).at("tokens"));
  const auto missing = run_shell(env + " inspect ollama:gemma4:e4b 2>&1");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("gemma4:e4b is not installed in " + store.string() + " (installed: tiny:q4)"),
            std::string::npos)
      << missing.out;

  const auto text = run_cli("run --model " + file + " --prompt hello --threads 1", /*merge_stderr=*/true);
  EXPECT_EQ(text.code, 1);
  EXPECT_NE(text.out.find(file + ": has no tokenizer (metadata key 'tokenizer.ggml.model' is missing)"),
            std::string::npos)
      << text.out;
}

// `synth --format gguf --drafter FILE` writes the drafter as a gemma4-assistant file; `inspect`
// lists its types beside the target's, `run --draft FILE` speculates with it (the tokens of plain
// decoding), and the drafter given as --model is refused by name.
TEST(GgufCli, DrafterFile) {
  const test::ScopedTempDir tmp("specula-gguf-cli");
  const std::string target = tmp.file("tiny.gguf"), drafter = tmp.file("tiny-assistant.gguf");
  const auto synth =
      run_cli("synth --preset tiny-dense --format gguf --quant q8_0 --out " + target + " --drafter " + drafter);
  ASSERT_EQ(synth.code, 0) << synth.out;
  EXPECT_NE(synth.out.find("gemma4-assistant drafter for tiny-dense (GGUF, q8_0 matrices, dense head)"),
            std::string::npos)
      << synth.out;

  const auto inspect = run_cli("inspect " + target + " --draft " + drafter + " --json");
  ASSERT_EQ(inspect.code, 0) << inspect.out;
  const nlohmann::json doc = nlohmann::json::parse(inspect.out);
  const nlohmann::json& types = doc.at("drafter_gguf").at("ggml_types");
  EXPECT_EQ(types.at("nextn.pre_projection.weight"), (nlohmann::json{{"q8_0", 1}}));
  EXPECT_EQ(types.at("attn_q.weight").at("q8_0"), 4);  // every drafter layer
  EXPECT_FALSE(types.contains("masked_embd_centroids.weight"));

  const std::string flags = " --tokens 2,17,99,5 --max-tokens 12 --ignore-eos --json --threads 1 --precision exact";
  const auto plain = run_cli("run --model " + target + flags);
  const auto spec = run_cli("run --model " + target + " --draft " + drafter + " --gamma 3" + flags);
  ASSERT_EQ(plain.code, 0) << plain.out;
  ASSERT_EQ(spec.code, 0) << spec.out;
  const nlohmann::json s = nlohmann::json::parse(spec.out);
  EXPECT_EQ(s.at("tokens"), nlohmann::json::parse(plain.out).at("tokens"));
  EXPECT_GT(s.at("stats").at("drafted").get<int64_t>(), 0);

  const auto misplaced = run_cli("run --model " + drafter + " --tokens 2 --max-tokens 1", /*merge_stderr=*/true);
  EXPECT_EQ(misplaced.code, 1);
  EXPECT_NE(misplaced.out.find(drafter + ": general.architecture is \"gemma4-assistant\": this is an assistant "
                                         "drafter, not a target model"),
            std::string::npos)
      << misplaced.out;
}

TEST(GgufCli, TextModeFromTheFilesOwnTokenizerAndTemplate) {
  const test::ScopedTempDir tmp("specula-gguf-text");
  const std::string file = tmp.file("tiny.gguf");
  const std::string tokenizer_dir = std::string(SPECULA_TEST_DATA) + "/tokenizer-gemma4";
  const auto synth =
      run_cli("synth --preset tiny-dense --vocab 262144 --format gguf --tokenizer " + tokenizer_dir + " --out " + file);
  ASSERT_EQ(synth.code, 0) << synth.out;

  const auto run =
      run_cli("run --model " + file + " --chat --prompt 'Hi there' --max-tokens 5 --ignore-eos --json --threads 1");
  ASSERT_EQ(run.code, 0) << run.out;
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  EXPECT_EQ(doc.at("tokens").size(), 5u);
  EXPECT_TRUE(doc.at("text").is_string());
  // <bos><|turn>user\nHi there<turn|>\n<|turn>model\n<|channel>thought\n<channel|>: the ids
  // tokenizer.json gives this rendered prompt (`tokenize --model tests/data/tokenizer-gemma4`).
  const std::vector<int32_t> expected = {2, 105, 2364, 107, 10979, 993, 106, 107, 105, 4368, 107, 100, 45518, 107, 101};
  EXPECT_EQ(doc.at("stats").at("prompt_tokens").get<size_t>(), expected.size()) << run.out;

  const std::string messages = tmp.file("messages.json");
  std::ofstream(messages) << R"([{"role": "user", "content": "Hi there"}])";
  const auto from_gguf = run_cli("render --model " + file + " --messages " + messages);
  const auto from_dir = run_cli("render --model " + tokenizer_dir + " --messages " + messages);
  ASSERT_EQ(from_gguf.code, 0) << from_gguf.out;
  const std::string prompt = tmp.file("prompt.txt");
  std::ofstream(prompt, std::ios::binary) << from_gguf.out;
  const auto ids = run_cli("tokenize --model " + file + " --no-special < " + prompt);
  ASSERT_EQ(ids.code, 0) << ids.out;
  EXPECT_EQ(nlohmann::json::parse(ids.out).get<std::vector<int32_t>>(), expected);
  EXPECT_EQ(from_gguf.out, from_dir.out);
}

}  // namespace
}  // namespace specula
