// OpenAI request parsing (server/openai_request.h): accepted shapes, defaults, the specula
// extension, and every refusal naming its field with a 400.
#include <gtest/gtest.h>

#include <string>

#include "specula/server/openai_request.h"

namespace {

using specula::server::ApiError;
using specula::server::parse_chat_completion_request;
using specula::server::parse_completion_request;
using specula::server::RequestLimits;
using specula::server::ToolChoice;

const RequestLimits kLimits = [] {
  RequestLimits l;
  l.vocab_size = 1000;
  return l;
}();

// The ApiError a chat body throws (status 0 when it parses).
ApiError chat_error(const std::string& body) {
  try {
    parse_chat_completion_request(body, kLimits);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "parsed");
}

ApiError completion_error(const std::string& body) {
  try {
    parse_completion_request(body, kLimits);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "parsed");
}

TEST(ServerRequest, ChatMinimalHasDefaults) {
  const auto r = parse_chat_completion_request(R"({"messages":[{"role":"user","content":"hi"}]})", kLimits);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["content"], "hi");
  EXPECT_FALSE(r.params.stream);
  EXPECT_FALSE(r.params.max_tokens.has_value());
  EXPECT_FALSE(r.params.sampling.temperature.has_value());
  EXPECT_FALSE(r.params.speculative.has_value());
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_FALSE(r.logprobs);
}

TEST(ServerRequest, ChatFieldsAreRead) {
  const auto r = parse_chat_completion_request(R"({
    "model": "m", "messages": [{"role":"system","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                               {"role":"user","content":"q"}],
    "max_tokens": 5, "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1,
    "presence_penalty": 1, "frequency_penalty": -1, "repetition_penalty": 1.1, "seed": 42,
    "logit_bias": {"12": -100, "7": 3.5}, "stop": ["x", "yy"], "stream": true,
    "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 3,
    "speculative": false, "gamma": 4, "chat_template_kwargs": {"enable_thinking": true}, "unknown": [1, 2]
  })",
                                               kLimits);
  EXPECT_EQ(r.params.model, "m");
  EXPECT_EQ(r.messages[0]["content"], "ab");
  EXPECT_EQ(*r.params.max_tokens, 7);
  EXPECT_DOUBLE_EQ(*r.params.sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(*r.params.sampling.top_p, 0.9);
  EXPECT_EQ(*r.params.sampling.top_k, 40);
  EXPECT_DOUBLE_EQ(*r.params.sampling.min_p, 0.1);
  EXPECT_DOUBLE_EQ(*r.params.sampling.presence_penalty, 1.0);
  EXPECT_DOUBLE_EQ(*r.params.sampling.frequency_penalty, -1.0);
  EXPECT_DOUBLE_EQ(*r.params.sampling.repetition_penalty, 1.1);
  EXPECT_EQ(*r.params.sampling.seed, 42u);
  ASSERT_EQ(r.params.sampling.logit_bias->size(), 2u);
  EXPECT_DOUBLE_EQ(r.params.sampling.logit_bias->at(12), -100.0);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"x", "yy"}));
  EXPECT_TRUE(r.params.stream);
  EXPECT_TRUE(r.params.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.params.speculative, false);
  EXPECT_EQ(*r.params.gamma, "4");
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
}

TEST(ServerRequest, NullMeansAbsentAndStopMayBeAString) {
  const auto r = parse_chat_completion_request(
      R"({"messages":[{"role":"user","content":"hi"}],"temperature":null,"stop":"END","gamma":"auto","n":1})", kLimits);
  EXPECT_FALSE(r.params.sampling.temperature.has_value());
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(*r.params.gamma, "auto");
}

TEST(ServerRequest, ToolCallsAndToolMessagesAreNormalized) {
  const auto r = parse_chat_completion_request(R"({
    "messages": [{"role":"user","content":"weather?"},
                 {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
                   "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
                 {"role":"tool","tool_call_id":"call_1","content":"sunny"}],
    "tools": [{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
    "tool_choice": {"type":"function","function":{"name":"get_weather"}}
  })",
                                               kLimits);
  const auto& call = r.messages[1]["tool_calls"][0];
  EXPECT_EQ(call["id"], "call_1");
  EXPECT_EQ(call["function"]["arguments"]["city"], "Paris");  // an object for the template
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");
  EXPECT_EQ(r.tool_choice, ToolChoice::Function);
  EXPECT_TRUE(r.tools.is_array());
  EXPECT_TRUE(r.parallel_tool_calls);
  const auto single = parse_chat_completion_request(
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
          "tool_choice":"required","parallel_tool_calls":false})",
      kLimits);
  EXPECT_EQ(single.tool_choice, ToolChoice::Required);
  EXPECT_FALSE(single.parallel_tool_calls);
  const auto none = parse_chat_completion_request(
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
          "tool_choice":"none"})",
      kLimits);
  EXPECT_TRUE(none.tools.is_null());
}

TEST(ServerRequest, ChatRefusalsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"messages":[{"role":"user","content":"x"}],"n":2})", "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":"1"})", "n"},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({})", "messages"},
      {R"({"messages":[{"role":"robot","content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})",
       "messages[0].content[0].type"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":-1})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2.5})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", "stop[0]"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"abc":1}})", "logit_bias.abc"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"5000":1}})", "logit_bias.5000"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"5":101}})", "logit_bias.5"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"gamma":"many"})", "gamma"},
      {R"({"messages":[{"role":"user","content":"x"}],"gamma":-1})", "gamma"},
      {R"({"messages":[{"role":"user","content":"x"}],"speculative":1})", "speculative"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"parallel_tool_calls":"no"})", "parallel_tool_calls"},
      // A forced tool call and a content constraint exclude each other.
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
          "tool_choice":"required","response_format":{"type":"json_object"}})",
       "response_format"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
          "tool_choice":{"type":"function","function":{"name":"f"}},"grammar":"root ::= \"a\""})",
       "grammar"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})", "tools[0].function"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})", "response_format.type"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}})",
       "response_format.json_schema"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"a"}}}})",
       "response_format.json_schema.schema"},
      {R"({"messages":[{"role":"user","content":"x"}],"json_schema":{"type":"nope"}})", "json_schema"},
      {R"({"messages":[{"role":"user","content":"x"}],"guided_json":"{not json"})", "guided_json"},
      {R"({"messages":[{"role":"user","content":"x"}],"grammar":"root ::= ("})", "grammar"},
      {R"({"messages":[{"role":"user","content":"x"}],"guided_grammar":5})", "guided_grammar"},
      {R"({"messages":[{"role":"user","content":"x"}],"guided_regex":"a+"})", "guided_regex"},
      {R"({"messages":[{"role":"user","content":"x"}],"guided_choice":["a"]})", "guided_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"json_schema":{},"grammar":"root ::= \"a\""})", "grammar"},
      {R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{"}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
  };
  for (const auto& [body, param] : cases) {
    const ApiError e = chat_error(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << ": " << e.what();
    EXPECT_EQ(e.type, "invalid_request_error") << body;
  }
}

// Every numeric field out of its range: a 400 naming the field, the value and the allowed range
// (the ranges the CLI flags use too, engine/option_limits.h).
TEST(ServerRequest, NumericFieldsOutOfRangeNameTheFieldTheValueAndTheRange) {
  const struct {
    const char* field;
    const char* value;
    const char* range;
  } cases[] = {
      {"gamma", "9999", "[0, 64]"},
      {"gamma", "\"65\"", "[0, 64]"},
      {"max_tokens", "0", "[1, 1073741824]"},
      {"max_completion_tokens", "2000000000", "[1, 1073741824]"},
      {"temperature", "101", "[0, 100]"},
      {"top_p", "1.5", "(0, 1]"},
      {"top_k", "-2", "[-1, 1073741824]"},
      {"top_k", "2147483648", "[-1, 1073741824]"},
      {"min_p", "-0.1", "[0, 1]"},
      {"presence_penalty", "2.5", "[-2, 2]"},
      {"frequency_penalty", "-3", "[-2, 2]"},
      {"repetition_penalty", "0", "(0, 100]"},
      {"repetition_penalty", "1000", "(0, 100]"},
      {"top_logprobs", "21", "[0, 20]"},
  };
  for (const auto& c : cases) {
    const std::string body = std::string(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,")") + c.field +
                             "\":" + c.value + "}";
    const ApiError e = chat_error(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, c.field) << body << ": " << e.what();
    const std::string message = e.what();
    std::string shown = c.value;
    if (shown.front() == '"') shown = shown.substr(1, shown.size() - 2);
    EXPECT_NE(message.find(shown), std::string::npos) << message;
    EXPECT_NE(message.find(c.range), std::string::npos) << message;
  }
  // The logit bias: ids against the vocabulary (1000 here), biases against their range.
  EXPECT_NE(std::string(chat_error(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"1000":1}})").what())
                .find("[0, 999]"),
            std::string::npos);
  EXPECT_NE(std::string(chat_error(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"5":-101}})").what())
                .find("[-100, 100]"),
            std::string::npos);
  // The edges are accepted.
  const auto r = parse_chat_completion_request(
      R"({"messages":[{"role":"user","content":"x"}],"gamma":64,"temperature":100,"top_k":-1,"repetition_penalty":100})",
      kLimits);
  EXPECT_EQ(*r.params.gamma, "64");
  EXPECT_EQ(*r.params.sampling.top_k, 0);
}

TEST(ServerRequest, OutputConstraintsInEverySpellingAreCompiled) {
  const char* bodies[] = {
      R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})",
      R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"w","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}}})",
      R"({"messages":[{"role":"user","content":"x"}],"json_schema":{"type":"array","items":{"enum":["a","b"]}}})",
      R"({"messages":[{"role":"user","content":"x"}],"guided_json":"{\"type\": \"boolean\"}"})",
      R"({"messages":[{"role":"user","content":"x"}],"grammar":"root ::= \"yes\" | \"no\""})",
      R"({"messages":[{"role":"user","content":"x"}],"guided_grammar":"root ::= [0-9]+","response_format":{"type":"text"}})",
  };
  for (const char* body : bodies)
    EXPECT_NE(parse_chat_completion_request(body, kLimits).params.grammar, nullptr) << body;
  EXPECT_NE(parse_completion_request(R"({"prompt":"x","guided_json":{"type":"null"}})", kLimits).params.grammar,
            nullptr);
  EXPECT_EQ(parse_chat_completion_request(
                R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}})", kLimits)
                .params.grammar,
            nullptr);
  const ApiError e =
      chat_error(R"({"messages":[{"role":"user","content":"x"}],"grammar":"root ::= \"a\"\nroot ::= x"})");
  EXPECT_NE(std::string(e.what()).find("grammar line 2, column 1: rule 'root' is defined twice"), std::string::npos)
      << e.what();
}

TEST(ServerRequest, MalformedAndHostileBodiesAre400) {
  for (const std::string& body : {std::string("{"), std::string("not json"), std::string("[1,2]"), std::string(""),
                                  std::string(100000, '['), std::string("{\"messages\":") + std::string(70, '[')}) {
    const ApiError e = chat_error(body);
    EXPECT_EQ(e.status, 400) << body.substr(0, 40);
  }
}

TEST(ServerRequest, CompletionPromptShapes) {
  EXPECT_EQ(parse_completion_request(R"({"prompt":"abc"})", kLimits).prompt, "abc");
  EXPECT_EQ(parse_completion_request(R"({"prompt":["abc"]})", kLimits).prompt, "abc");
  const auto ids = parse_completion_request(R"({"prompt":[2,5,9],"logprobs":2})", kLimits);
  ASSERT_TRUE(ids.prompt_tokens.has_value());
  EXPECT_EQ(*ids.prompt_tokens, (std::vector<int32_t>{2, 5, 9}));
  EXPECT_EQ(ids.logprobs, 2);
  EXPECT_EQ(*parse_completion_request(R"({"prompt":[[2,3]]})", kLimits).prompt_tokens, (std::vector<int32_t>{2, 3}));

  EXPECT_EQ(completion_error(R"({"prompt":["a","b"]})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"prompt":[2,1000]})").param, "prompt[1]");
  EXPECT_EQ(completion_error(R"({"prompt":[2,-1]})").param, "prompt[1]");
  EXPECT_EQ(completion_error(R"({"prompt":5})").param, "prompt");
  EXPECT_EQ(completion_error(R"({})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"prompt":"a","echo":true})").param, "echo");
  EXPECT_EQ(completion_error(R"({"prompt":"a","logprobs":true})").param, "logprobs");
  EXPECT_EQ(completion_error(R"({"prompt":"a","best_of":3})").param, "best_of");
  EXPECT_EQ(completion_error(R"({"prompt":"a","n":3})").param, "n");
}

}  // namespace
