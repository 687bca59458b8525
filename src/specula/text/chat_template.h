#pragma once
// A model's chat template and how Hugging Face's apply_chat_template renders it: the template
// comes from `chat_template.jinja`, else `tokenizer_config.json`'s `chat_template` (a string, or a
// list of {name, template}), else `chat_template.json`; it is rendered with the variables
// messages, tools (null when none), documents (null), add_generation_prompt, the special tokens
// of tokenizer_config.json (bos_token, eos_token, ...), and any extra variables.
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "specula/text/jinja/template.h"

namespace specula {

// The special tokens of `model_dir`'s tokenizer_config.json (bos_token, eos_token, ...) as an
// object of strings; empty when the file is absent.
nlohmann::ordered_json tokenizer_special_tokens(const std::filesystem::path& model_dir);

// Whether `model_dir` ships a chat template at all (chat_template.jinja, chat_template.json or
// tokenizer_config.json's chat_template); a broken one is found here and fails when loaded.
bool has_chat_template(const std::filesystem::path& model_dir);

class ChatTemplate {
 public:
  // Loads the template of the model in `model_dir`. `name` selects one of several named templates
  // in tokenizer_config.json (empty: "default"). Throws specula::Error naming the file and key when there is no
  // template or it does not parse.
  static ChatTemplate from_model_dir(const std::filesystem::path& model_dir, const std::string& name = "");

  // The template in `template_file` (an override), with the special tokens of `model_dir`'s
  // tokenizer_config.json when `model_dir` is non-empty and has one.
  static ChatTemplate from_file(const std::filesystem::path& template_file,
                                const std::filesystem::path& model_dir = {});

  // A template from text; `special_tokens` is an object such as {"bos_token": "<bos>"}.
  ChatTemplate(const std::string& source, std::string origin,
               nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());

  // messages: array of {role, content, ...}; tools: array or null; extra_variables: object whose
  // entries are added to (and override) the template variables. Keys keep the caller's order.
  // Throws specula::Error: "<origin>: template line N: ..." for template errors, or the message of
  // the template's raise_exception unchanged.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools = nullptr,
                     bool add_generation_prompt = true,
                     const nlohmann::ordered_json& extra_variables = nlohmann::ordered_json::object()) const;

  // Replaces the clock strftime_now() reads (tests pin the date).
  void set_clock(std::function<std::tm()> now);

  const std::string& source() const { return source_; }
  const std::string& origin() const { return origin_; }
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

 private:
  void compile();

  std::string source_;
  std::string origin_;  // where the template came from, for error messages
  nlohmann::ordered_json special_tokens_;
  std::function<std::tm()> now_;
  std::shared_ptr<const jinja::Template> template_;
};

}  // namespace specula
