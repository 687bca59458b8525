#include "specula/text/chat_template.h"

#include <fstream>
#include <sstream>

#include "specula/text/jinja/errors.h"
#include "specula/util/error.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("cannot read {}", path.string());
  return text.str();
}

nlohmann::ordered_json read_json(const fs::path& path) {
  try {
    return nlohmann::ordered_json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON: {}", path.string(), e.what());
  }
}

// The special tokens of tokenizer_config.json as template variables. A token is written either
// as a string or as a serialized AddedToken {"content": ...}.
nlohmann::ordered_json special_tokens_of(const nlohmann::ordered_json& config) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
  if (!config.is_object()) return tokens;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) {
      tokens[key] = *it;
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      tokens[key] = (*it)["content"];
    }
  }
  return tokens;
}

nlohmann::ordered_json tokenizer_config_of(const fs::path& model_dir) {
  if (model_dir.empty()) return nlohmann::ordered_json::object();
  const fs::path path = model_dir / "tokenizer_config.json";
  if (!fs::exists(path)) return nlohmann::ordered_json::object();
  return read_json(path);
}

std::string select_named(const nlohmann::ordered_json& list, const std::string& name, const fs::path& path) {
  std::string names;
  const nlohmann::ordered_json* chosen = nullptr;
  const nlohmann::ordered_json* fallback = nullptr;
  for (const auto& entry : list) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string()) {
      fail("{}: chat_template list entries must be {{\"name\": string, \"template\": string}}", path.string());
    }
    const std::string entry_name = entry["name"].get<std::string>();
    names += (names.empty() ? "" : ", ") + entry_name;
    if (entry_name == (name.empty() ? "default" : name)) chosen = &entry;
    if (entry_name == "default") fallback = &entry;
  }
  if (!chosen && name.empty()) chosen = fallback;
  if (!chosen) {
    fail("{}: no chat template named '{}' (available: {})", path.string(), name.empty() ? "default" : name, names);
  }
  return (*chosen)["template"].get<std::string>();
}

}  // namespace

bool has_chat_template(const fs::path& model_dir) {
  if (fs::is_regular_file(model_dir / "chat_template.jinja") || fs::is_regular_file(model_dir / "chat_template.json"))
    return true;
  const fs::path config = model_dir / "tokenizer_config.json";
  if (!fs::is_regular_file(config)) return false;
  std::ifstream in(config);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("chat_template");
}

nlohmann::ordered_json tokenizer_special_tokens(const fs::path& model_dir) {
  return special_tokens_of(tokenizer_config_of(model_dir));
}

ChatTemplate ChatTemplate::from_model_dir(const fs::path& model_dir, const std::string& name) {
  const nlohmann::ordered_json config = tokenizer_config_of(model_dir);
  const nlohmann::ordered_json tokens = special_tokens_of(config);
  const fs::path jinja_file = model_dir / "chat_template.jinja";
  if (name.empty() && fs::exists(jinja_file)) return ChatTemplate(read_text(jinja_file), jinja_file.string(), tokens);

  const fs::path config_path = model_dir / "tokenizer_config.json";
  if (config.contains("chat_template")) {
    const auto& value = config["chat_template"];
    if (value.is_string()) {
      if (!name.empty() && name != "default") {
        fail("{}: has a single chat template, not one named '{}'", config_path.string(), name);
      }
      return ChatTemplate(value.get<std::string>(), config_path.string() + " (chat_template)", tokens);
    }
    if (value.is_array()) {
      return ChatTemplate(select_named(value, name, config_path),
                          config_path.string() + " (chat_template '" + (name.empty() ? "default" : name) + "')",
                          tokens);
    }
    fail("{}: chat_template must be a string or a list of named templates, got {}", config_path.string(),
         value.type_name());
  }
  const fs::path processor_file = model_dir / "chat_template.json";
  if (fs::exists(processor_file)) {
    const nlohmann::ordered_json processor = read_json(processor_file);
    if (processor.is_object() && processor.contains("chat_template") && processor["chat_template"].is_string()) {
      return ChatTemplate(processor["chat_template"].get<std::string>(), processor_file.string() + " (chat_template)",
                          tokens);
    }
    fail("{}: has no chat_template string", processor_file.string());
  }
  if (!name.empty() && fs::exists(jinja_file)) {
    fail("{}: a single template; no template named '{}'", jinja_file.string(), name);
  }
  fail(
      "{}: no chat template (looked for chat_template.jinja, the chat_template key of tokenizer_config.json, and "
      "chat_template.json)",
      model_dir.string());
}

ChatTemplate ChatTemplate::from_file(const fs::path& template_file, const fs::path& model_dir) {
  return ChatTemplate(read_text(template_file), template_file.string(),
                      special_tokens_of(tokenizer_config_of(model_dir)));
}

ChatTemplate::ChatTemplate(const std::string& source, std::string origin, nlohmann::ordered_json special_tokens)
    : source_(source), origin_(std::move(origin)), special_tokens_(std::move(special_tokens)) {
  if (!special_tokens_.is_object()) fail("{}: special tokens must be a JSON object", origin_);
  compile();
}

void ChatTemplate::compile() {
  jinja::RenderOptions options;
  options.now = now_;
  try {
    template_ = std::make_shared<const jinja::Template>(source_, jinja::LexerOptions{}, options);
  } catch (const jinja::TemplateError& e) {
    fail("{}: {}", origin_, e.what());
  }
}

void ChatTemplate::set_clock(std::function<std::tm()> now) {
  now_ = std::move(now);
  compile();
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const nlohmann::ordered_json& extra_variables) const {
  if (!messages.is_array()) fail("chat messages must be a JSON array, got {}", messages.type_name());
  if (!tools.is_null() && !tools.is_array()) fail("chat tools must be a JSON array or null, got {}", tools.type_name());
  if (!extra_variables.is_object())
    fail("extra template variables must be a JSON object, got {}", extra_variables.type_name());
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [k, v] : special_tokens_.items()) context[k] = v;
  for (const auto& [k, v] : extra_variables.items()) context[k] = v;
  try {
    return template_->render(context);
  } catch (const jinja::TemplateError& e) {
    fail("{}: {}", origin_, e.what());
  }
}

}  // namespace specula
