#pragma once
// Gemma 4 tool calls: the model writes
//   <|tool_call>call:NAME{key:value,...}<tool_call|>
// where strings are wrapped in the <|"|> delimiter token, keys are bare, objects and arrays nest,
// and numbers / true / false / null are written as they are. This turns such text into JSON.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace specula::text {

struct ToolCall {
  std::string name;
  nlohmann::json arguments;  // an object
};

struct ToolCallExtraction {
  std::string content;              // the text outside tool-call blocks
  std::vector<ToolCall> calls;      // in order of appearance
  std::vector<std::string> errors;  // one per malformed block (its text is kept in `content`)
};

inline constexpr std::string_view kToolCallBegin = "<|tool_call>";
inline constexpr std::string_view kToolCallEnd = "<tool_call|>";
inline constexpr std::string_view kToolStringDelimiter = "<|\"|>";

// Extracts every tool-call block from decoded model output (special tokens kept as text).
// An unterminated block at the end counts as malformed.
ToolCallExtraction extract_tool_calls(std::string_view text);

// Converts one brace-balanced body "{key:value,...}" to a JSON object. Throws specula::Error naming
// the byte offset of the problem.
nlohmann::json parse_tool_call_arguments(std::string_view body);

}  // namespace specula::text
