#pragma once
// Text mode of `specula run`: --prompt TEXT (raw text, BOS added once by the tokenizer's
// post-processor) or --chat (the checkpoint's chat template around the prompt as a user message,
// with an optional --system message), and the streaming of the generated text to stdout.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "specula/text/detokenizer.h"
#include "specula/text/tokenizer.h"

namespace specula::cli {

struct TextPromptArgs {
  std::string prompt;                    // --prompt
  bool chat = false;                     // --chat
  std::string system;                    // --system
  CLI::Option* prompt_option = nullptr;  // set by add_text_prompt_options: --prompt "" is a prompt too
};

// Registers --prompt, --chat and --system on `cmd`.
void add_text_prompt_options(CLI::App* cmd, TextPromptArgs& args);

// True when the run takes text (--prompt) instead of token ids.
bool text_prompt_requested(const TextPromptArgs& args);

// Loads the checkpoint's tokenizer (tokenizer.json, else a GGUF's own; model/checkpoint_text.h);
// throws specula::Error with the reason there is none.
text::Tokenizer load_model_tokenizer(const std::string& model_dir);

// The prompt ids: raw text encoded with the tokenizer's special tokens (one <bos>), or the chat
// template rendered with add_generation_prompt and encoded without adding special tokens again
// (the template writes <bos> itself).
std::vector<int32_t> encode_text_prompt(const text::Tokenizer& tokenizer, const std::string& model_dir,
                                        const TextPromptArgs& args);

// The tokenizer side of the EOS set (engine/eos_tokens.h) for `model_dir`: its eos token and its
// chat template's end-of-turn token.
std::vector<int32_t> text_eos_ids(const text::Tokenizer& tokenizer, const std::string& model_dir);

// Receives the generated ids one by one; with `stream` it writes the text that became final to
// stdout at once. Special tokens (the EOS set among them) produce no text.
class TextOutput {
 public:
  TextOutput(text::Tokenizer tokenizer, bool stream);

  void push(int32_t id);
  // Flushes what is still held; returns the whole generated text.
  const std::string& finish();

 private:
  void write(const std::string& piece) const;

  std::unique_ptr<text::Tokenizer> tokenizer_;  // stable address for the detokenizer
  std::unique_ptr<text::StreamingDetokenizer> detokenizer_;
  bool stream_ = false;
  bool finished_ = false;
};

// The plain-text (non --json) output of `specula run`: with text output the text has streamed
// already and only the closing newline is left; without, the token ids as one comma-separated line.
void print_run_output(const std::vector<int32_t>& tokens, TextOutput* text);

}  // namespace specula::cli
