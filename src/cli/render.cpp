// `specula render --model DIR|FILE.gguf --messages FILE.json [--tools FILE.json] [--no-generation-prompt]
// [--chat-template FILE] [--template-name NAME] [--var name=json]...`: prints the prompt the
// model's chat template makes of a conversation, exactly (no newline added), for checking a
// template against other engines. FILE may be "-" for stdin.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_path.h"
#include "specula/model/checkpoint_text.h"
#include "specula/text/chat_template.h"
#include "specula/util/error.h"

namespace specula::cli {

namespace {

struct RenderArgs {
  std::string model;
  std::string messages;
  std::string tools;
  std::string chat_template;
  std::string template_name;
  std::vector<std::string> vars;
  bool no_generation_prompt = false;
};

nlohmann::ordered_json read_json_file(const std::string& path, const char* what) {
  std::string text;
  if (path == "-") {
    std::ostringstream s;
    s << std::cin.rdbuf();
    text = s.str();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open the {} file {}", what, path);
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("the {} file {} is not valid JSON: {}", what, path, e.what());
  }
}

// `name=json`; a value that is not JSON is taken as a plain string (`--var date_string=26 Jul 2024`).
void parse_var(const std::string& spec, nlohmann::ordered_json& vars) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) fail("--var expects name=json, got '{}'", spec);
  const std::string name = spec.substr(0, eq);
  const std::string value = spec.substr(eq + 1);
  try {
    vars[name] = nlohmann::ordered_json::parse(value);
  } catch (const nlohmann::json::exception&) {
    vars[name] = value;
  }
}

void run_render(const RenderArgs& a) {
  if (a.model.empty() && a.chat_template.empty()) fail("render needs --model DIR or --chat-template FILE");
  nlohmann::ordered_json messages = read_json_file(a.messages, "messages");
  nlohmann::ordered_json tools = nullptr;
  // Also accept a request body {"messages": [...], "tools": [...]}.
  if (messages.is_object() && messages.contains("messages")) {
    if (messages.contains("tools")) tools = messages["tools"];
    messages = nlohmann::ordered_json(messages["messages"]);
  }
  if (!messages.is_array()) fail("{}: messages must be a JSON array of {{\"role\", \"content\"}} objects", a.messages);
  if (!a.tools.empty()) tools = read_json_file(a.tools, "tools");
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  for (const auto& spec : a.vars) parse_var(spec, vars);
  const ChatTemplate chat_template =
      a.chat_template.empty()
          ? load_checkpoint_chat_template(a.model, a.template_name)
          : ChatTemplate(ChatTemplate::from_file(a.chat_template).source(), a.chat_template,
                         a.model.empty() ? nlohmann::ordered_json::object() : checkpoint_special_tokens(a.model));
  const std::string prompt = chat_template.render(messages, tools, !a.no_generation_prompt, vars);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_render_command(CLI::App& app) {
  auto args = std::make_shared<RenderArgs>();
  CLI::App* cmd = app.add_subcommand("render", "print the prompt a model's chat template makes of a conversation");
  cmd->add_option("--model", args->model,
                  "model directory or .gguf file (chat_template.jinja, tokenizer_config.json or the GGUF's "
                  "tokenizer.chat_template)")
      ->transform(model_path());
  cmd->add_option("--messages", args->messages, "JSON file with the messages array ('-': stdin)")->required();
  cmd->add_option("--tools", args->tools, "JSON file with the tools array");
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt, "do not append the assistant turn opener");
  cmd->add_option("--chat-template", args->chat_template, "use this Jinja template file instead of the model's");
  cmd->add_option("--template-name", args->template_name, "pick a named template of tokenizer_config.json");
  cmd->add_option("--var", args->vars, "extra template variable name=json (repeatable), e.g. enable_thinking=true");
  cmd->callback([args] { run_render(*args); });
}

}  // namespace specula::cli
