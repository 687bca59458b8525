#include "specula/model/checkpoint_text.h"

#include <filesystem>
#include <optional>

#include "specula/io/gguf.h"
#include "specula/io/weight_files.h"
#include "specula/model/gguf_target.h"
#include "specula/text/gguf_tokenizer.h"
#include "specula/util/error.h"

namespace specula {

namespace {

namespace fs = std::filesystem;

// The .gguf file of `path` when its text files are not beside it (nullopt otherwise).
std::optional<std::string> gguf_text_source(const std::string& path, const char* beside) {
  if (fs::is_regular_file(fs::path(model_files_dir(path)) / beside)) return std::nullopt;
  return gguf_file_of(path);
}

}  // namespace

CheckpointTokenizer find_checkpoint_tokenizer(const std::string& path) {
  CheckpointTokenizer out;
  const fs::path json_file = fs::path(model_files_dir(path)) / "tokenizer.json";
  const std::optional<std::string> gguf = gguf_text_source(path, "tokenizer.json");
  if (!gguf) {
    if (!fs::is_regular_file(json_file)) {
      out.missing = fmt::format("{} not found", json_file.string());
      return out;
    }
    out.origin = json_file.string();
    out.tokenizer = std::make_unique<text::Tokenizer>(text::Tokenizer::load(out.origin));
    return out;
  }
  out.origin = *gguf;
  try {
    out.tokenizer = std::make_unique<text::Tokenizer>(text::gguf_tokenizer(GgufFile::open(*gguf)));
  } catch (const Error& e) {
    out.missing = e.what();
  }
  return out;
}

text::Tokenizer load_checkpoint_tokenizer(const std::string& path) {
  CheckpointTokenizer found = find_checkpoint_tokenizer(path);
  if (!found.tokenizer) {
    fail(
        "{} (text needs the checkpoint's tokenizer: put the model's tokenizer.json beside the weights, or give token "
        "ids with --tokens)",
        found.missing);
  }
  return std::move(*found.tokenizer);
}

bool checkpoint_has_chat_template(const std::string& path) {
  if (has_chat_template(model_files_dir(path))) return true;
  const std::optional<std::string> gguf = gguf_file_of(path);
  return gguf && GgufFile::open(*gguf).has("tokenizer.chat_template");
}

ChatTemplate load_checkpoint_chat_template(const std::string& path, const std::string& name) {
  const std::string dir = model_files_dir(path);
  const std::optional<std::string> gguf = has_chat_template(dir) ? std::nullopt : gguf_file_of(path);
  if (!gguf) return ChatTemplate::from_model_dir(dir, name);
  const GgufFile f = GgufFile::open(*gguf);
  const std::optional<std::string> text = text::gguf_chat_template(f, name);
  if (!text) {
    fail(
        "{}: no chat template (metadata key '{}' is missing, and no chat_template.jinja or tokenizer_config.json "
        "is beside the file); give one with --chat-template FILE",
        *gguf, name.empty() ? "tokenizer.chat_template" : "tokenizer.chat_template." + name);
  }
  return ChatTemplate(*text, *gguf + " (tokenizer.chat_template)", checkpoint_special_tokens(path));
}

nlohmann::ordered_json checkpoint_special_tokens(const std::string& path) {
  const std::optional<std::string> gguf = gguf_text_source(path, "tokenizer_config.json");
  if (!gguf) return tokenizer_special_tokens(model_files_dir(path));
  return text::gguf_special_tokens(GgufFile::open(*gguf));
}

}  // namespace specula
