// Fuzz entry: the chat-template engine, template source and variables both from the input.
#include <ctime>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_entries.h"
#include "specula/text/chat_template.h"
#include "specula/util/error.h"

namespace specula::fuzz {

int fuzz_chat_template(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string source(input.substr(0, split));
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  if (split != std::string_view::npos) {
    const std::string_view json = input.substr(split + 1);
    vars = nlohmann::ordered_json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
    if (vars.is_discarded() || !vars.is_object()) vars = nlohmann::ordered_json::object();
  }
  nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                                   {{"role", "user"}, {"content", "Hi"}},
                                                                   {{"role", "assistant"}, {"content", "Hello!"}},
                                                                   {{"role", "user"}, {"content", "2+2?"}}});
  nlohmann::ordered_json tools = nullptr;
  bool add_generation_prompt = true;
  if (vars.contains("messages")) messages = vars["messages"];
  if (vars.contains("tools")) tools = vars["tools"];
  if (vars.contains("add_generation_prompt") && vars["add_generation_prompt"].is_boolean())
    add_generation_prompt = vars["add_generation_prompt"].get<bool>();
  try {
    ChatTemplate tmpl(source, "fuzz/chat_template.jinja",
                      nlohmann::ordered_json{{"bos_token", "<bos>"}, {"eos_token", "<eos>"}});
    tmpl.set_clock([] {
      std::tm t{};
      t.tm_year = 126;
      t.tm_mon = 10;
      t.tm_mday = 30;
      return t;
    });
    (void)tmpl.render(messages, tools, add_generation_prompt, vars);
  } catch (const specula::Error&) {
  }
  return 0;
}

}  // namespace specula::fuzz
