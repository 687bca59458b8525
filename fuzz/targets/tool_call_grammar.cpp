// Fuzz entry: the tool-call grammar from a request's `tools` array (JSON Schema `parameters` in
// Gemma's argument syntax), then the matcher over the input's own bytes, bytes 0-2 standing for the
// three delimiter tokens (so a grammar that compiles is also run).
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_entries.h"
#include "specula/grammar/grammar_matcher.h"
#include "specula/grammar/tool_call_grammar.h"
#include "specula/util/error.h"

namespace specula::fuzz {

int fuzz_tool_call_grammar(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  nlohmann::ordered_json tools;
  try {
    tools = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  const grammar::ToolCallTokens tokens{48, 49, 52};
  const int32_t by_byte[] = {tokens.call_begin, tokens.call_end, tokens.string_delimiter};
  grammar::ToolCallChoice choice;
  choice.parallel_calls = (data[0] & 1) != 0;
  // Bit 1: name the first tool (when it has a string name).
  if ((data[0] & 2) && tools.is_array() && !tools.empty() && tools[0].is_object()) {
    const auto fn = tools[0].find("function");
    if (fn != tools[0].end() && fn->is_object() && fn->contains("name") && (*fn)["name"].is_string())
      choice.function = (*fn)["name"].get<std::string>();
  }
  try {
    const auto g = std::make_shared<const grammar::Grammar>(grammar::tool_call_grammar(tools, choice, tokens));
    grammar::GrammarMatcher m(g);
    for (const char c : text.substr(0, 256)) {
      const auto b = static_cast<uint8_t>(c);
      if (!(b < 3 ? m.accept_token_id(by_byte[b]) : m.accept_byte(b))) break;
    }
    (void)m.can_end();
  } catch (const specula::Error&) {
  }
  return 0;
}

}  // namespace specula::fuzz
