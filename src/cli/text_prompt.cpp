#include "cli/text_prompt.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "specula/engine/eos_tokens.h"
#include "specula/model/checkpoint_text.h"
#include "specula/text/chat_template.h"
#include "specula/util/error.h"

namespace specula::cli {

void add_text_prompt_options(CLI::App* cmd, TextPromptArgs& a) {
  a.prompt_option =
      cmd->add_option("--prompt", a.prompt, "prompt text (encoded with the checkpoint's tokenizer, one <bos>)");
  cmd->add_flag("--chat", a.chat, "with --prompt: render the chat template around it as a user message");
  cmd->add_option("--system", a.system, "with --chat: a system message before the user message");
}

bool text_prompt_requested(const TextPromptArgs& a) {
  return (a.prompt_option != nullptr && a.prompt_option->count() > 0) || a.chat || !a.system.empty();
}

text::Tokenizer load_model_tokenizer(const std::string& model_dir) { return load_checkpoint_tokenizer(model_dir); }

std::vector<int32_t> encode_text_prompt(const text::Tokenizer& tokenizer, const std::string& model_dir,
                                        const TextPromptArgs& a) {
  if (!a.chat) {
    if (!a.system.empty()) throw CLI::ValidationError("--system", "needs --chat (a raw --prompt has no message roles)");
    return tokenizer.encode(a.prompt, /*add_special_tokens=*/true);
  }
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  messages.push_back({{"role", "user"}, {"content", a.prompt}});
  const ChatTemplate chat_template = load_checkpoint_chat_template(model_dir);
  const std::string rendered = chat_template.render(messages, nullptr, /*add_generation_prompt=*/true);
  return tokenizer.encode(rendered, /*add_special_tokens=*/false);
}

std::vector<int32_t> text_eos_ids(const text::Tokenizer& tokenizer, const std::string& model_dir) {
  std::optional<ChatTemplate> chat_template;
  if (checkpoint_has_chat_template(model_dir)) chat_template.emplace(load_checkpoint_chat_template(model_dir));
  return tokenizer_eos_ids(tokenizer, checkpoint_special_tokens(model_dir), chat_template ? &*chat_template : nullptr);
}

TextOutput::TextOutput(text::Tokenizer tokenizer, bool stream)
    : tokenizer_(std::make_unique<text::Tokenizer>(std::move(tokenizer))),
      detokenizer_(std::make_unique<text::StreamingDetokenizer>(*tokenizer_)),
      stream_(stream) {}

void TextOutput::push(int32_t id) { write(detokenizer_->push(id)); }

const std::string& TextOutput::finish() {
  if (!finished_) {
    write(detokenizer_->finish());
    finished_ = true;
  }
  return detokenizer_->text();
}

void TextOutput::write(const std::string& piece) const {
  if (!stream_ || piece.empty()) return;
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);  // the user sees each piece as it is produced
}

void print_run_output(const std::vector<int32_t>& tokens, TextOutput* text) {
  if (text != nullptr) {
    text->finish();
    std::fputs("\n", stdout);
  } else {
    std::string ids;
    for (size_t i = 0; i < tokens.size(); ++i) ids += (i ? "," : "") + std::to_string(tokens[i]);
    std::fputs((ids + "\n").c_str(), stdout);
  }
  std::fflush(stdout);
}

}  // namespace specula::cli
