// Forced tool calls on a tiny golden model with the real Gemma 4 tokenizer (its first 512 ids:
// the special tokens, byte fallback and the first merges): under tool_choice "required" or a named
// function, generation always gives Gemma tool calls that the extraction parses and whose
// arguments validate against the tool's schema, for plain and speculative decoding, and greedy
// speculative output equals plain output token for token.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gemma_tokenizer.h"
#include "json_schema_check.h"
#include "spec_golden_util.h"
#include "specula/engine/token_vocabulary.h"
#include "specula/grammar/tool_call_grammar.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"
#include "specula/text/tool_calls.h"
#include "specula/util/thread_pool.h"

namespace specula {
namespace {

using spec_test::golden_root;

// Bounded strings, enums and integers: a random model must finish a call within the token budget.
const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object",
    "properties": {
      "city": {"type": "string", "maxLength": 6},
      "unit": {"enum": ["celsius", "fahrenheit"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 14}
    },
    "required": ["city", "unit", "days"],
    "additionalProperties": false}}},
  {"type": "function", "function": {"name": "set_alarm", "parameters": {
    "type": "object",
    "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23}, "label": {"type": ["string", "null"], "maxLength": 4}},
    "required": ["hour", "label"],
    "additionalProperties": false}}}
])";

class ToolCallDecoding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto dir = golden_root() / "dense-q5g64-window4";
    model_ = TargetModel::load((dir / "model").string()).release();
    drafter_ = Drafter::load((dir / "drafter").string(), *model_).release();
    vocabulary_ = build_token_vocabulary(test::gemma_tokenizer(), model_->vocab_size());
  }
  static void TearDownTestSuite() {
    delete drafter_;
    delete model_;
  }

  static grammar::TokenConstraint constraint(const grammar::ToolCallChoice& choice) {
    const text::Tokenizer& tok = test::gemma_tokenizer();
    const grammar::ToolCallTokens tokens{*tok.token_to_id(text::kToolCallBegin), *tok.token_to_id(text::kToolCallEnd),
                                         *tok.token_to_id(text::kToolStringDelimiter)};
    return {std::make_shared<const grammar::Grammar>(
                grammar::tool_call_grammar(nlohmann::ordered_json::parse(kTools), choice, tokens)),
            vocabulary_};
  }

  SpeculativeResult run(SpeculativeOptions o, const grammar::ToolCallChoice& choice, bool use_drafter) {
    o.constraint = constraint(choice);
    o.max_tokens = 300;
    TargetCache cache = model_->new_cache();
    return generate_speculative(*model_, cache, use_drafter ? drafter_ : nullptr, prompt_, o, pool_);
  }

  static SpeculativeOptions plain() {
    SpeculativeOptions o;
    o.method = DraftMethod::Lookup;
    o.gamma.fixed = 0;
    return o;
  }

  // The output holds exactly one call (of `function` when named), which parses and validates.
  static void expect_one_valid_call(const SpeculativeResult& r, const std::string& function) {
    EXPECT_EQ(r.stop_reason, "eos");
    const std::string text = test::gemma_tokenizer().decode(r.tokens, /*skip_special_tokens=*/false);
    const text::ToolCallExtraction found = text::extract_tool_calls(text);
    EXPECT_TRUE(found.errors.empty()) << text;
    EXPECT_EQ(found.content, "") << text;
    ASSERT_EQ(found.calls.size(), 1u) << text;
    const text::ToolCall& call = found.calls[0];
    if (!function.empty()) {
      EXPECT_EQ(call.name, function);
    }
    const nlohmann::json tools = nlohmann::json::parse(kTools);
    const nlohmann::json* schema = nullptr;
    for (const auto& t : tools)
      if (t["function"]["name"] == call.name) schema = &t["function"]["parameters"];
    ASSERT_NE(schema, nullptr) << text;
    EXPECT_EQ(test::schema_violation(call.arguments, *schema, *schema), "") << text;
  }

  static inline TargetModel* model_ = nullptr;
  static inline Drafter* drafter_ = nullptr;
  static inline std::shared_ptr<const grammar::TokenTrie> vocabulary_;
  std::vector<int32_t> prompt_{2, 105, 300, 301, 302, 106, 105, 310};
  ThreadPool pool_{1};
};

TEST_F(ToolCallDecoding, GreedyCallsValidateAndSpeculativeEqualsPlain) {
  for (const grammar::ToolCallChoice& choice :
       {grammar::ToolCallChoice{"", false}, grammar::ToolCallChoice{"set_alarm", true}}) {
    const SpeculativeResult ref = run(plain(), choice, false);
    expect_one_valid_call(ref, choice.function);
    for (const int64_t gamma : {1, 3}) {
      SpeculativeOptions o;
      o.gamma.fixed = gamma;
      const SpeculativeResult r = run(o, choice, true);
      EXPECT_EQ(r.tokens, ref.tokens) << "gamma " << gamma;
      EXPECT_EQ(r.stop_reason, ref.stop_reason);
    }
    SpeculativeOptions lookup;
    lookup.method = DraftMethod::Lookup;
    lookup.gamma.fixed = 4;
    EXPECT_EQ(run(lookup, choice, false).tokens, ref.tokens);
  }
}

TEST_F(ToolCallDecoding, SampledCallsValidatePlainAndSpeculative) {
  for (const uint64_t seed : {1u, 2u, 3u}) {
    for (const grammar::ToolCallChoice& choice :
         {grammar::ToolCallChoice{"", false}, grammar::ToolCallChoice{"get_weather", true}}) {
      SpeculativeOptions p = plain();
      p.sampling.temperature = 1.0;
      p.sampling.seed = seed;
      expect_one_valid_call(run(p, choice, false), choice.function);
      SpeculativeOptions s;
      s.gamma.fixed = 3;
      s.sampling.temperature = 1.0;
      s.sampling.seed = seed;
      expect_one_valid_call(run(s, choice, true), choice.function);
    }
  }
}

}  // namespace
}  // namespace specula
