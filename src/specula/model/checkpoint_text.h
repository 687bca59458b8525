#pragma once
// Where a checkpoint's tokenizer, chat template and template special tokens come from: the
// Hugging Face files beside the weights (tokenizer.json, tokenizer_config.json,
// chat_template.jinja) when present, else — for a GGUF checkpoint — the file's own metadata
// (tokenizer.ggml.*, tokenizer.chat_template; text/gguf_tokenizer.h). A GGUF whose tokenizer
// metadata cannot be used still runs on token ids; text then fails with the reason.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "specula/text/chat_template.h"
#include "specula/text/tokenizer.h"

namespace specula {

struct CheckpointTokenizer {
  std::unique_ptr<text::Tokenizer> tokenizer;  // null when the checkpoint has none specula can use
  std::string origin;                          // tokenizer.json's path, or the .gguf file's
  std::string missing;                         // when null: why, naming the file (and key or model type)
};

// `path` is a checkpoint directory, a .gguf file or a directory holding one. A broken
// tokenizer.json still throws (it was meant to be used); an unusable GGUF tokenizer does not.
CheckpointTokenizer find_checkpoint_tokenizer(const std::string& path);

// The tokenizer, or specula::Error with find_checkpoint_tokenizer's reason.
text::Tokenizer load_checkpoint_tokenizer(const std::string& path);

// Whether the checkpoint has a chat template (files beside it, or tokenizer.chat_template).
bool checkpoint_has_chat_template(const std::string& path);

// The chat template (`name` selects a named one), with the special tokens of
// checkpoint_special_tokens. Throws specula::Error naming where it looked.
ChatTemplate load_checkpoint_chat_template(const std::string& path, const std::string& name = "");

// tokenizer_config.json's special tokens, else those a GGUF's ids name.
nlohmann::ordered_json checkpoint_special_tokens(const std::string& path);

}  // namespace specula
