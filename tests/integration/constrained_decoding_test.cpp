// Constrained decoding on the tiny golden models: output under a JSON Schema always parses and
// validates, and speculative decoding under the constraint equals plain constrained decoding
// (greedy: the same tokens with the drafter, forced random drafts and prompt lookup).
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "golden_vocabulary.h"
#include "json_schema_check.h"
#include "spec_golden_util.h"
#include "specula/grammar/json_schema.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"
#include "specula/util/thread_pool.h"

namespace specula {
namespace {

using spec_test::golden_root;

// Strings, enums and numbers are bounded, so a random model must finish the object within
// the token budget.
const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 6},
    "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 3},
    "n": {"type": "integer", "minimum": -20, "maximum": 300},
    "ok": {"type": "boolean"},
    "sub": {"type": "object", "properties": {"x": {"type": ["integer", "null"], "maximum": 99}}, "required": ["x"]}
  },
  "required": ["name", "tags", "n", "ok", "sub"],
  "additionalProperties": false
})";

class ConstrainedDecoding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto dir = golden_root() / "dense-q5g64-window4";
    model_ = TargetModel::load((dir / "model").string()).release();
    drafter_ = Drafter::load((dir / "drafter").string(), *model_).release();
    constraint_.grammar = std::make_shared<const grammar::Grammar>(
        grammar::grammar_from_json_schema(nlohmann::ordered_json::parse(kSchema)));
    constraint_.vocabulary = std::make_shared<const grammar::TokenTrie>(test::golden_vocabulary(*model_));
  }
  static void TearDownTestSuite() {
    delete drafter_;
    delete model_;
  }

  SpeculativeResult run(SpeculativeOptions o, bool use_drafter) {
    o.constraint = constraint_;
    o.max_tokens = 400;
    TargetCache cache = model_->new_cache();
    return generate_speculative(*model_, cache, use_drafter ? drafter_ : nullptr, prompt_, o, pool_);
  }

  static SpeculativeOptions plain() {
    SpeculativeOptions o;
    o.method = DraftMethod::Lookup;
    o.gamma.fixed = 0;
    return o;
  }

  std::string text_of(const std::vector<int32_t>& tokens) {
    std::string s;
    for (const int32_t t : tokens) s += constraint_.vocabulary->bytes_of(t);
    return s;
  }

  void expect_valid(const SpeculativeResult& r) {
    EXPECT_EQ(r.stop_reason, "eos");
    const std::string text = text_of(r.tokens);
    nlohmann::json value;
    ASSERT_NO_THROW(value = nlohmann::json::parse(text)) << text;
    EXPECT_EQ(test::schema_violation(value, nlohmann::json::parse(kSchema)), "") << text;
  }

  static inline TargetModel* model_ = nullptr;
  static inline Drafter* drafter_ = nullptr;
  static inline grammar::TokenConstraint constraint_;
  std::vector<int32_t> prompt_{2, 17, 99, 4, 250};
  ThreadPool pool_{1};
};

TEST_F(ConstrainedDecoding, GreedyOutputValidatesAndSpeculativeEqualsPlain) {
  const SpeculativeResult ref = run(plain(), false);
  expect_valid(ref);
  for (const int64_t gamma : {1, 3}) {
    SpeculativeOptions o;
    o.gamma.fixed = gamma;
    const SpeculativeResult r = run(o, true);
    EXPECT_EQ(r.tokens, ref.tokens) << "gamma " << gamma;
    EXPECT_EQ(r.stop_reason, ref.stop_reason);
  }
  SpeculativeOptions lookup;
  lookup.method = DraftMethod::Lookup;
  lookup.gamma.fixed = 4;
  EXPECT_EQ(run(lookup, false).tokens, ref.tokens);
}

TEST_F(ConstrainedDecoding, ForcedDraftsThatBreakTheGrammarAreRejectedExactly) {
  const SpeculativeResult ref = run(plain(), false);
  // Half the drafts are the reference continuation, half random tokens (mostly invalid): each
  // verify row must use the mask of its own prefix for the output to stay the same.
  SpeculativeOptions o;
  o.method = DraftMethod::Lookup;
  o.gamma.fixed = 4;
  std::mt19937 rng(3);
  o.override_drafts = [&](const DraftRoundInfo& info, std::vector<int32_t>& drafts) {
    drafts.clear();
    const size_t done = info.context.size() - info.prompt_length;
    for (int64_t k = 0; k < info.gamma; ++k) {
      const size_t at = done + static_cast<size_t>(k);
      const bool right = rng() % 2 == 0 && at < ref.tokens.size();
      drafts.push_back(right ? ref.tokens[at] : static_cast<int32_t>(rng() % 512));
    }
  };
  const SpeculativeResult r = run(o, false);
  EXPECT_EQ(r.tokens, ref.tokens);
  EXPECT_GT(r.stats.accepted, 0);
}

TEST_F(ConstrainedDecoding, SampledOutputValidatesPlainAndSpeculative) {
  for (const uint64_t seed : {1u, 2u}) {
    SpeculativeOptions p = plain();
    p.sampling.temperature = 1.0;
    p.sampling.seed = seed;
    expect_valid(run(p, false));
    SpeculativeOptions s;
    s.gamma.fixed = 3;
    s.sampling.temperature = 1.0;
    s.sampling.seed = seed;
    expect_valid(run(s, true));
  }
}

TEST_F(ConstrainedDecoding, IgnoreEosStopsWhenTheGrammarIsComplete) {
  SpeculativeOptions o = plain();
  o.ignore_eos = true;
  const SpeculativeResult r = run(o, false);
  expect_valid(r);
}

}  // namespace
}  // namespace specula
