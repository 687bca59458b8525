// `specula tokenize --model DIR|FILE.gguf [--text T | stdin] [--no-special] [--tokens]` prints the ids of a
// text as a JSON array (with --tokens: {"ids": [...], "tokens": [...]}), and
// `specula detokenize --model DIR [--ids JSON | stdin] [--skip-special] [--json]` turns a JSON array
// of ids back into text. For scripts and for debugging prompts.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_path.h"
#include "specula/model/checkpoint_text.h"
#include "specula/model/gguf_target.h"
#include "specula/text/tokenizer.h"
#include "specula/util/error.h"

namespace specula::cli {

namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool no_special = false;
  bool tokens = false;
};

struct DetokenizeArgs {
  std::string model;
  std::string ids;
  bool skip_special = false;
  bool json = false;
};

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

void print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

// --model: a tokenizer.json file, or a checkpoint (directory or .gguf file) whose tokenizer is used.
text::Tokenizer load_tokenizer_of(const std::string& model) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(model, ec) && !gguf_file_of(model)) return text::Tokenizer::load(model);
  return load_checkpoint_tokenizer(model);
}

void run_tokenize(const TokenizeArgs& a, bool text_given) {
  const text::Tokenizer tok = load_tokenizer_of(a.model);
  const std::string input = text_given ? a.text : read_stdin();
  const std::vector<int32_t> ids = tok.encode(input, !a.no_special);
  nlohmann::json out = ids;
  if (a.tokens) {
    nlohmann::json strings = nlohmann::json::array();
    for (int32_t id : ids) strings.push_back(tok.id_to_token(id).value_or(""));
    out = {{"ids", ids}, {"tokens", strings}};
  }
  // Token strings may hold partial UTF-8 (never for ids from encode, but be safe): replace, not throw.
  print(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void run_detokenize(const DetokenizeArgs& a, bool ids_given) {
  const text::Tokenizer tok = load_tokenizer_of(a.model);
  const std::string input = ids_given ? a.ids : read_stdin();
  const nlohmann::json parsed = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) fail("detokenize: expected a JSON array of token ids, got: {}", input.substr(0, 80));
  std::vector<int32_t> ids;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const nlohmann::json& v = parsed[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= static_cast<int64_t>(tok.vocab_size())) {
      fail("detokenize: element {} ({}) is not a token id in 0..{}", i, v.dump(), tok.vocab_size() - 1);
    }
    ids.push_back(v.get<int32_t>());
  }
  const std::string text = tok.decode(ids, a.skip_special);
  if (a.json) {
    print(nlohmann::json{{"text", text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  } else {
    print(text);
  }
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text as JSON");
  cmd->add_option("--model", args->model, "checkpoint directory, .gguf file, or a tokenizer.json file")
      ->required()
      ->transform(model_path());
  CLI::Option* text = cmd->add_option("--text", args->text, "text to encode (default: read stdin)");
  cmd->add_flag("--no-special", args->no_special, "do not add special tokens (no <bos>)");
  cmd->add_flag("--tokens", args->tokens, "also print the token strings");
  cmd->callback([args, text] { run_tokenize(*args, text->count() > 0); });
}

void add_detokenize_command(CLI::App& app) {
  auto args = std::make_shared<DetokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("detokenize", "print the text of a JSON array of token ids");
  cmd->add_option("--model", args->model, "checkpoint directory, .gguf file, or a tokenizer.json file")
      ->required()
      ->transform(model_path());
  CLI::Option* ids = cmd->add_option("--ids", args->ids, "JSON array of ids (default: read stdin)");
  cmd->add_flag("--skip-special", args->skip_special, "drop special tokens such as <bos> and <turn|>");
  cmd->add_flag("--json", args->json, "print {\"text\": ...} instead of the raw text");
  cmd->callback([args, ids] { run_detokenize(*args, ids->count() > 0); });
}

}  // namespace specula::cli
