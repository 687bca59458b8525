#pragma once
// The grammar of Gemma 4 tool calls (text/tool_calls.h) for a request's tools, to enforce OpenAI's
// tool_choice "required" and {"type": "function", "function": {"name": ...}}. Each call is
//   <|tool_call>call:NAME{arguments}<tool_call|>
// with the three Gemma delimiters matched as special token ids (never as text), and the arguments
// following the tool's JSON Schema `parameters` in Gemma's argument syntax (json_schema.h,
// ValueSyntax::Kind::GemmaArguments). A tool without `parameters` takes any object.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "specula/grammar/grammar.h"

namespace specula::grammar {

// The Gemma tokenizer's ids of <|tool_call>, <tool_call|> and <|"|>.
struct ToolCallTokens {
  int32_t call_begin = -1;
  int32_t call_end = -1;
  int32_t string_delimiter = -1;
};

struct ToolCallChoice {
  std::string function;        // empty: any of the tools; else exactly this one, called once
  bool parallel_calls = true;  // any tool: one or more calls (true) or exactly one
};

// The grammar text (root rule "root") for `tools`, an OpenAI `tools` array. Throws specula::Error
// naming the tool (tools[i]) and, for its schema, what is wrong where.
std::string tool_call_gbnf(const nlohmann::ordered_json& tools, const ToolCallChoice& choice,
                           const ToolCallTokens& tokens);
Grammar tool_call_grammar(const nlohmann::ordered_json& tools, const ToolCallChoice& choice,
                          const ToolCallTokens& tokens);

}  // namespace specula::grammar
