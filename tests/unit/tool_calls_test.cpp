// Gemma 4 tool-call extraction: names, <|"|> strings, nested objects and arrays,
// literals, several calls, and malformed blocks kept as text.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gemma_tokenizer.h"
#include "specula/text/tool_calls.h"
#include "specula/util/error.h"

namespace specula::text {
namespace {

using nlohmann::json;

TEST(ToolCalls, SimpleCall) {
  const auto r = extract_tool_calls("<|tool_call>call:bash{command:<|\"|>ls -la<|\"|>}<tool_call|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "bash");
  EXPECT_EQ(r.calls[0].arguments, json({{"command", "ls -la"}}));
  EXPECT_EQ(r.content, "");
  EXPECT_TRUE(r.errors.empty());
}

TEST(ToolCalls, NestedArgumentsAndLiterals) {
  const std::string text =
      "Let me check.<|tool_call>call:get-weather_v2{location:{city:<|\"|>Paris, \"FR\" {x}<|\"|>,"
      "coords:[48.85,2.35]},units:[<|\"|>celsius<|\"|>,<|\"|>kelvin<|\"|>],days:3,verbose:true,"
      "filter:null,opts:{nested:{deep:[{a:-1.5e3},[]]}},empty:{}}<tool_call|>Done.";
  const auto r = extract_tool_calls(text);
  ASSERT_TRUE(r.errors.empty()) << r.errors[0];
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get-weather_v2");
  const json want = json::parse(R"({
    "location": {"city": "Paris, \"FR\" {x}", "coords": [48.85, 2.35]},
    "units": ["celsius", "kelvin"], "days": 3, "verbose": true, "filter": null,
    "opts": {"nested": {"deep": [{"a": -1500.0}, []]}}, "empty": {}})");
  EXPECT_EQ(r.calls[0].arguments, want);
  EXPECT_EQ(r.content, "Let me check.Done.");
}

TEST(ToolCalls, SeveralCalls) {
  const auto r = extract_tool_calls(
      "<|tool_call>call:a{x:1}<tool_call|><|tool_call>call:b{y:<|\"|>two<|\"|>}<tool_call|>"
      "<|tool_call>call:c{} call:d{z:[1,2]}<tool_call|>");
  ASSERT_EQ(r.calls.size(), 4u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[0].arguments, json({{"x", 1}}));
  EXPECT_EQ(r.calls[1].arguments, json({{"y", "two"}}));
  EXPECT_EQ(r.calls[2].arguments, json::object());
  EXPECT_EQ(r.calls[3].arguments, json({{"z", {1, 2}}}));
}

TEST(ToolCalls, MalformedBlocksStayInContent) {
  const std::string broken = "<|tool_call>call:f{x:<|\"|>unterminated}<tool_call|>";
  auto r = extract_tool_calls("a" + broken + "b");
  EXPECT_TRUE(r.calls.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.content, "a" + broken + "b");

  r = extract_tool_calls("x<|tool_call>call:f{a:1}");  // generation stopped inside the block
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.content, "x<|tool_call>call:f{a:1}");

  EXPECT_EQ(extract_tool_calls("<|tool_call>f{a:1}<tool_call|>").errors.size(), 1u);
  EXPECT_EQ(extract_tool_calls("<|tool_call>call:f{a:1,,}<tool_call|>").errors.size(), 1u);
  EXPECT_EQ(extract_tool_calls("no calls here").content, "no calls here");
  EXPECT_THROW(parse_tool_call_arguments("{a:1} trailing"), Error);
  EXPECT_THROW(parse_tool_call_arguments("{a 1}"), Error);
}

TEST(ToolCalls, FromGemmaTokenIds) {
  // The tokenizer golden of a bash tool call (tokenizer_test.cpp), decoded with special tokens
  // kept, as a generation loop would.
  const auto& tok = specula::test::gemma_tokenizer();
  const std::vector<int32_t> ids = {48, 6639, 236787, 42422, 236782, 7674, 236787, 52, 5629, 753, 2149, 52, 236783, 49};
  const auto r = extract_tool_calls(tok.decode(ids, false));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "bash");
  EXPECT_EQ(r.calls[0].arguments, json({{"command", "ls -la"}}));
}

}  // namespace
}  // namespace specula::text
