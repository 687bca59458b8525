// The Gemma 4 tool-call grammar (grammar/tool_call_grammar.h) at the matcher level: calls with
// schema-valid arguments are accepted and everything else refused, the delimiters pass only as
// their special token ids; random walks under the token mask always give calls that the
// extraction (text/tool_calls.h) parses and whose arguments validate; on the real Gemma 4
// vocabulary no ordinary token can stand for a delimiter.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "gemma_tokenizer.h"
#include "grammar_walk.h"
#include "json_schema_check.h"
#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/grammar_matcher.h"
#include "specula/grammar/token_mask.h"
#include "specula/grammar/tool_call_grammar.h"
#include "specula/text/tool_calls.h"

namespace specula::grammar {
namespace {

using ojson = nlohmann::ordered_json;

// The Gemma 4 ids of <|tool_call>, <tool_call|> and <|"|>.
constexpr ToolCallTokens kGemmaTokens{48, 49, 52};

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object",
    "properties": {
      "city": {"type": "string", "maxLength": 8},
      "unit": {"enum": ["celsius", "fahrenheit"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 14}
    },
    "required": ["city", "unit"],
    "additionalProperties": false}}},
  {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object",
    "properties": {"query": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
    "required": ["query"]}}},
  {"type": "function", "function": {"name": "ping"}}
])";

ojson tools() { return ojson::parse(kTools); }

std::shared_ptr<const Grammar> grammar_for(const ToolCallChoice& choice) {
  return std::make_shared<const Grammar>(tool_call_grammar(tools(), choice, kGemmaTokens));
}

// Output as the model writes it: text pieces and special tokens, "<48>" etc. standing for an id.
struct Piece {
  int32_t token = -1;  // -1: `text`
  std::string text;
};
Piece tok(int32_t id) { return {id, {}}; }
Piece txt(std::string s) { return {-1, std::move(s)}; }
const Piece kBegin = tok(48), kEnd = tok(49), kQuote = tok(52);

bool accepts(GrammarMatcher& m, const std::vector<Piece>& pieces) {
  for (const Piece& p : pieces)
    if (p.token >= 0 ? !m.accept_token_id(p.token) : !m.accept_bytes(p.text)) return false;
  return true;
}

bool complete(const ToolCallChoice& choice, const std::vector<Piece>& pieces) {
  GrammarMatcher m(grammar_for(choice));
  return accepts(m, pieces) && m.can_end();
}

const std::vector<Piece> kWeatherCall = {kBegin, txt("call:get_weather{city:"),
                                         kQuote, txt("Paris"),
                                         kQuote, txt(",unit:"),
                                         kQuote, txt("celsius"),
                                         kQuote, txt(",days:3}"),
                                         kEnd};

TEST(ToolCallGrammar, AcceptsCallsWhoseArgumentsFollowTheSchema) {
  const ToolCallChoice any;
  EXPECT_TRUE(complete(any, kWeatherCall));
  EXPECT_TRUE(complete(any, {kBegin, txt("call:search{query:"), kQuote, txt("a|b || c>d"), kQuote, txt(",tags:["),
                             kQuote, txt("x"), kQuote, txt("]}"), kEnd}));
  EXPECT_TRUE(complete(any, {kBegin, txt("call:ping{}"), kEnd}));
  EXPECT_TRUE(
      complete(any, {kBegin, txt("call:ping{any:[1,null,false],o:{n:-1.5e3,s:"), kQuote, kQuote, txt("}}"), kEnd}));
  // Parallel calls: one block per call.
  std::vector<Piece> two = kWeatherCall;
  two.insert(two.end(), {kBegin, txt("call:ping{}"), kEnd});
  EXPECT_TRUE(complete(any, two));
}

TEST(ToolCallGrammar, RefusesTextInvalidArgumentsAndSpelledDelimiters) {
  const ToolCallChoice any;
  GrammarMatcher start(grammar_for(any));
  EXPECT_FALSE(start.accept_byte('H'));                                 // plain text instead of a call
  EXPECT_FALSE(start.accept_bytes("<|tool_call>"));                     // the delimiter spelled in ordinary text
  EXPECT_FALSE(start.can_end());                                        // at least one call
  EXPECT_FALSE(complete(any, {kBegin, txt("call:get_time{}"), kEnd}));  // not a tool
  // Missing required "unit", a value outside the enum, an undeclared property, a bound broken.
  EXPECT_FALSE(complete(any, {kBegin, txt("call:get_weather{city:"), kQuote, txt("Rome"), kQuote, txt("}"), kEnd}));
  EXPECT_FALSE(complete(any, {kBegin, txt("call:get_weather{city:"), kQuote, txt("Rome"), kQuote, txt(",unit:"), kQuote,
                              txt("kelvin"), kQuote, txt("}"), kEnd}));
  EXPECT_FALSE(complete(any, {kBegin, txt("call:get_weather{city:"), kQuote, txt("Rome"), kQuote, txt(",unit:"), kQuote,
                              txt("celsius"), kQuote, txt(",wind:1}"), kEnd}));
  EXPECT_FALSE(complete(any, {kBegin, txt("call:get_weather{city:"), kQuote, txt("Rome"), kQuote, txt(",unit:"), kQuote,
                              txt("celsius"), kQuote, txt(",days:15}"), kEnd}));
  EXPECT_FALSE(complete(any, {kBegin, txt("call:get_weather{city:"), kQuote, txt("Amsterdam"), kQuote, txt(",unit:"),
                              kQuote, txt("celsius"), kQuote, txt("}"), kEnd}));  // maxLength 8
  // Strings open and close only with the <|"|> token, and their text never spells "|>".
  GrammarMatcher m(grammar_for(any));
  ASSERT_TRUE(accepts(m, {kBegin, txt("call:search{query:")}));
  EXPECT_FALSE(m.accept_bytes("<|\"|>"));
  EXPECT_FALSE(m.accept_bytes("\""));
  ASSERT_TRUE(m.accept_token_id(52));
  EXPECT_TRUE(m.accept_bytes("a<|b|"));
  EXPECT_FALSE(m.accept_bytes(">"));
  EXPECT_FALSE(m.accept_token_id(49));  // the call cannot end inside a string
  // The bounded string counts characters with the same exclusion.
  GrammarMatcher bounded(grammar_for(any));
  ASSERT_TRUE(accepts(bounded, {kBegin, txt("call:get_weather{city:"), kQuote, txt("a|")}));
  EXPECT_FALSE(bounded.accept_bytes(">"));
  EXPECT_TRUE(bounded.accept_bytes("||||||"));
  EXPECT_FALSE(bounded.accept_bytes("x"));  // the ninth character
}

TEST(ToolCallGrammar, NamedFunctionAndSingleCall) {
  const ToolCallChoice named{"get_weather", true};
  EXPECT_TRUE(complete(named, kWeatherCall));
  EXPECT_FALSE(complete(named, {kBegin, txt("call:ping{}"), kEnd}));
  GrammarMatcher m(grammar_for(named));
  ASSERT_TRUE(accepts(m, kWeatherCall));
  EXPECT_TRUE(m.finished());  // a named function is called once
  EXPECT_FALSE(m.accept_token_id(48));

  const ToolCallChoice single{"", false};
  GrammarMatcher one(grammar_for(single));
  ASSERT_TRUE(accepts(one, {kBegin, txt("call:ping{}"), kEnd}));
  EXPECT_TRUE(one.finished());
  const ToolCallChoice parallel{"", true};
  GrammarMatcher many(grammar_for(parallel));
  ASSERT_TRUE(accepts(many, {kBegin, txt("call:ping{}"), kEnd}));
  EXPECT_TRUE(many.can_end());
  EXPECT_FALSE(many.finished());
  EXPECT_TRUE(many.accept_token_id(48));
}

TEST(ToolCallGrammar, ErrorsNameTheTool) {
  const ToolCallChoice any;
  auto error = [&](const char* tools_json, const ToolCallChoice& choice) {
    return test::error_of([&] { tool_call_grammar(ojson::parse(tools_json), choice, kGemmaTokens); });
  };
  EXPECT_NE(
      error(
          R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}}}])",
          any)
          .find("tools[0].function.parameters: json schema at #/properties/a: keyword 'pattern'"),
      std::string::npos);
  EXPECT_NE(
      error(R"([{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}])", any).find("tools[0]"),
      std::string::npos);
  EXPECT_NE(error(R"([{"type":"function","function":{"name":"a.b"}}])", any).find("tools[0].function.name \"a.b\""),
            std::string::npos);
  EXPECT_NE(error(R"([{"type":"function","function":{"name":"f"}}])", {"g", true}).find("no tool is named \"g\""),
            std::string::npos);
  EXPECT_NE(error(R"([])", any).find("at least one tool"), std::string::npos);
  // Only the named tool is compiled: another tool's unsupported schema does not matter.
  EXPECT_NO_THROW(tool_call_grammar(ojson::parse(R"([{"type":"function","function":{"name":"f"}},
                       {"type":"function","function":{"name":"g","parameters":{"properties":{"a":{"pattern":"x"}}}}}])"),
                                    {"f", true}, kGemmaTokens));
}

TEST(ToolCallGrammar, TokenTerminalsInGbnfText) {
  const auto g = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "a" <[7]> "b")"));
  EXPECT_EQ(g->token_terminals(), (std::vector<int32_t>{7}));
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_bytes("a"));
  EXPECT_EQ(m.next_token_terminals(), (std::vector<int32_t>{7}));
  EXPECT_FALSE(m.accept_token_id(8));
  ASSERT_TRUE(m.accept_token_id(7));
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.finished());
  EXPECT_NE(test::error_of([] { parse_gbnf("root ::= <[12"); }).find("']>' to close the token"), std::string::npos);
  EXPECT_NE(test::error_of([] { parse_gbnf("root ::= <[99999999999]>"); }).find("token id exceeds"), std::string::npos);
  EXPECT_NE(test::error_of([] { parse_gbnf("root ::= <x>"); }).find("<[id]>"), std::string::npos);
}

TEST(ToolCallGrammar, TokenTerminalsMustBeSpecialTokensOfTheVocabulary) {
  const auto trie = std::make_shared<const TokenTrie>(std::vector<std::string>{"a", "", "b", ""});
  auto refusal = [&](const char* gbnf, size_t vocab, std::vector<int32_t> ends) {
    const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
    return test::error_of([&] { TokenMasker(g, trie, vocab, ends); });
  };
  // 5 is past the trie but still in the model's vocabulary.
  EXPECT_NO_THROW(TokenMasker(std::make_shared<const Grammar>(parse_gbnf("root ::= <[1]> | <[5]>")), trie, 6, {3}));
  EXPECT_NE(refusal("root ::= <[2]>", 6, {}).find("ordinary token"), std::string::npos);
  EXPECT_NE(refusal("root ::= <[6]>", 6, {}).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(refusal("root ::= <[3]>", 6, {3}).find("ends the generation"), std::string::npos);
}

// A walk vocabulary with the three delimiters as byte-less special tokens and an end token last.
struct WalkVocabulary {
  std::vector<std::string> bytes;
  ToolCallTokens tokens;
  int32_t end = -1;
};

WalkVocabulary walk_vocabulary_with_specials() {
  WalkVocabulary v;
  v.bytes = test::walk_vocabulary();
  v.bytes.pop_back();  // its end token
  for (const char* s : {"call:", "get_weather", "celsius", "query", "city:", "<|", "|>", "|"}) v.bytes.push_back(s);
  const auto add_special = [&] {
    v.bytes.push_back("");
    return static_cast<int32_t>(v.bytes.size() - 1);
  };
  v.tokens = {add_special(), add_special(), add_special()};
  v.end = add_special();
  return v;
}

TEST(ToolCallGrammar, RandomWalksGiveCallsTheExtractionParsesAndTheSchemaAccepts) {
  const WalkVocabulary v = walk_vocabulary_with_specials();
  const auto trie = std::make_shared<const TokenTrie>(v.bytes);
  const nlohmann::json schemas = nlohmann::json::parse(kTools);
  for (const ToolCallChoice& choice : {ToolCallChoice{"", true}, ToolCallChoice{"get_weather", true}}) {
    const auto g = std::make_shared<const Grammar>(tool_call_grammar(tools(), choice, v.tokens));
    size_t calls = 0;
    for (uint32_t seed = 0; seed < 30; ++seed) {
      TokenMasker masker(g, trie, v.bytes.size(), {v.end});
      GrammarMatcher state(g);
      std::mt19937 rng(seed);
      std::string text;
      bool ended = false;
      for (int step = 0; step < 3000 && !ended; ++step) {
        const auto mask = masker.mask(state);
        std::vector<int32_t> allowed;
        for (size_t t = 0; t < v.bytes.size(); ++t)
          if ((mask[t >> 6] >> (t & 63)) & 1) allowed.push_back(static_cast<int32_t>(t));
        ASSERT_FALSE(allowed.empty()) << text;
        // Prefer closing tokens half the time so that walks end.
        int32_t pick = allowed[rng() % allowed.size()];
        if (rng() % 2 == 0)
          for (const int32_t p : {v.end, v.tokens.call_end, v.tokens.string_delimiter, int32_t{'}'}, int32_t{']'}})
            if ((mask[static_cast<size_t>(p) >> 6] >> (p & 63)) & 1) {
              pick = p;
              break;
            }
        if (pick == v.end) break;
        ASSERT_TRUE(masker.accept_token(state, pick));
        text += pick == v.tokens.call_begin         ? std::string(text::kToolCallBegin)
                : pick == v.tokens.call_end         ? std::string(text::kToolCallEnd)
                : pick == v.tokens.string_delimiter ? std::string(text::kToolStringDelimiter)
                                                    : v.bytes[static_cast<size_t>(pick)];
        ended = state.finished();
      }
      ASSERT_TRUE(state.can_end()) << "seed " << seed << ": the walk did not end: " << text;
      const text::ToolCallExtraction found = text::extract_tool_calls(text);
      EXPECT_TRUE(found.errors.empty()) << text << "\n" << (found.errors.empty() ? "" : found.errors[0]);
      EXPECT_EQ(found.content, "") << text;
      ASSERT_FALSE(found.calls.empty()) << text;
      if (!choice.function.empty()) {
        EXPECT_EQ(found.calls.size(), 1u);
      }
      for (const text::ToolCall& call : found.calls) {
        ++calls;
        if (!choice.function.empty()) {
          EXPECT_EQ(call.name, choice.function);
        }
        const nlohmann::json* tool = nullptr;
        for (const auto& t : schemas)
          if (t["function"]["name"] == call.name) tool = &t;
        ASSERT_NE(tool, nullptr) << call.name;
        const nlohmann::json schema = tool->at("function").value("parameters", nlohmann::json{{"type", "object"}});
        EXPECT_EQ(test::schema_violation(call.arguments, schema, schema), "") << text;
      }
    }
    EXPECT_GE(calls, 30u);
  }
}

TEST(ToolCallGrammar, OnTheGemmaVocabularyOnlyTheDelimiterTokensMayOpenACallOrAString) {
  const text::Tokenizer& tok = test::gemma_tokenizer();
  ASSERT_EQ(tok.token_to_id(text::kToolCallBegin), kGemmaTokens.call_begin);
  ASSERT_EQ(tok.token_to_id(text::kToolCallEnd), kGemmaTokens.call_end);
  ASSERT_EQ(tok.token_to_id(text::kToolStringDelimiter), kGemmaTokens.string_delimiter);
  std::vector<std::string> bytes(tok.vocab_size());
  for (size_t id = 0; id < bytes.size(); ++id) bytes[id] = tok.token_bytes(static_cast<int32_t>(id));
  const auto trie = std::make_shared<const TokenTrie>(std::move(bytes));
  const auto g = grammar_for({"get_weather", true});
  TokenMasker masker(g, trie, trie->vocab_size(), {1, 106});
  GrammarMatcher state(g);
  auto allowed = [&] {
    const auto mask = masker.mask(state);
    std::vector<int32_t> ids;
    for (size_t t = 0; t < trie->vocab_size(); ++t)
      if ((mask[t >> 6] >> (t & 63)) & 1) ids.push_back(static_cast<int32_t>(t));
    return ids;
  };
  EXPECT_EQ(allowed(), (std::vector<int32_t>{48}));
  ASSERT_TRUE(masker.accept_token(state, 48));
  for (const int32_t id : tok.encode("call:get_weather{city:", false)) ASSERT_TRUE(masker.accept_token(state, id));
  EXPECT_EQ(allowed(), (std::vector<int32_t>{52}));
  ASSERT_TRUE(masker.accept_token(state, 52));
  EXPECT_GT(allowed().size(), 1000u);  // string text: most of the vocabulary
}

}  // namespace
}  // namespace specula::grammar
