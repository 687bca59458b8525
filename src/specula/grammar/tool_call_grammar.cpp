#include "specula/grammar/tool_call_grammar.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/json_schema.h"
#include "specula/util/error.h"

namespace specula::grammar {
namespace {

using json = nlohmann::ordered_json;

// The characters text/tool_calls.h reads as a function name.
bool is_function_name(const std::string& name) {
  if (name.empty()) return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

// The arguments of tools[index] as the rule `rule` (plus its helper rules).
std::string argument_rules(const json& tool, size_t index, const std::string& rule, const ValueSyntax& syntax) {
  const std::string where = fmt::format("tools[{}].function.parameters", index);
  const json& function = tool.at("function");
  if (!function.contains("parameters") || function["parameters"].is_null())
    return json_schema_rules(json::object({{"type", "object"}}), rule, rule, syntax);
  const json& parameters = function["parameters"];
  if (!parameters.is_object()) fail("{} must be a JSON Schema object", where);
  if (parameters.contains("type") && parameters["type"] != "object")
    fail("{}: the arguments of a call are an object, so 'type' must be \"object\"", where);
  try {
    return json_schema_rules(parameters, rule, rule, syntax);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

}  // namespace

std::string tool_call_gbnf(const json& tools, const ToolCallChoice& choice, const ToolCallTokens& tokens) {
  if (!tools.is_array() || tools.empty()) fail("tools: a forced tool call needs at least one tool");
  const ValueSyntax syntax{ValueSyntax::Kind::GemmaArguments, tokens.string_delimiter};
  std::vector<std::string> calls;
  std::string rules;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
        !tool["function"].contains("name") || !tool["function"]["name"].is_string())
      fail("tools[{}]: a tool needs 'function.name'", i);
    const std::string name = tool["function"]["name"].get<std::string>();
    if (!choice.function.empty() && name != choice.function) continue;
    if (!is_function_name(name))
      fail("tools[{}].function.name \"{}\": Gemma's tool-call syntax allows letters, digits, '_' and '-'", i, name);
    const std::string args = fmt::format("t{}-args", i);
    rules += argument_rules(tool, i, args, syntax);
    calls.push_back(fmt::format("\"{}\" {}", name, args));
  }
  if (calls.empty()) fail("tools: no tool is named \"{}\"", choice.function);
  const bool many = choice.function.empty() && choice.parallel_calls;
  std::string out = fmt::format("root ::= call{}\n", many ? "+" : "");
  out += fmt::format("call ::= <[{}]> \"call:\" ( {} ) <[{}]>\n", tokens.call_begin, fmt::join(calls, " | "),
                     tokens.call_end);
  return out + rules + value_base_rules(syntax);
}

Grammar tool_call_grammar(const json& tools, const ToolCallChoice& choice, const ToolCallTokens& tokens) {
  return parse_gbnf(tool_call_gbnf(tools, choice, tokens));
}

}  // namespace specula::grammar
