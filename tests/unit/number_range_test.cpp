// Exact number bounds of JSON Schema (grammar/number_range.h): every short decimal is accepted
// exactly when its value lies within the bounds, for integers and numbers, inclusive and exclusive,
// negative and positive, and random constrained output stays in range.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "grammar_walk.h"
#include "json_schema_check.h"
#include "specula/grammar/json_schema.h"
#include "specula/grammar/number_range.h"

namespace specula::grammar {
namespace {

using json = nlohmann::ordered_json;

struct Written {
  std::string text;
  int64_t thousandths = 0;  // the exact value x 1000
};

// Every decimal "-"? I ("." F)? with I in 0..12 and F of 0 to 2 digits (trailing zeros included).
std::vector<Written> short_decimals() {
  std::vector<Written> out;
  for (const int sign : {1, -1})
    for (int64_t i = 0; i <= 12; ++i) {
      std::string head = sign < 0 ? "-" : "";
      head += std::to_string(i);
      out.push_back({head, sign * i * 1000});
      for (int64_t f = 0; f < 10; ++f) out.push_back({head + "." + std::to_string(f), sign * (i * 1000 + f * 100)});
      for (int64_t f = 0; f < 100; ++f)
        out.push_back({head + (f < 10 ? ".0" : ".") + std::to_string(f), sign * (i * 1000 + f * 10)});
    }
  return out;
}

bool accepts(const GrammarMatcher& start, const std::string& text) {
  GrammarMatcher m = start;
  return m.accept_bytes(text) && m.can_end();
}

struct Bounds {
  const char* schema;
  std::optional<int64_t> lo, hi;  // thousandths
  bool lo_inclusive = true, hi_inclusive = true;
};

bool in_range(const Bounds& b, int64_t v) {
  if (b.lo && (b.lo_inclusive ? v < *b.lo : v <= *b.lo)) return false;
  if (b.hi && (b.hi_inclusive ? v > *b.hi : v >= *b.hi)) return false;
  return true;
}

void expect_exact(const Bounds& b, bool integer) {
  const GrammarMatcher start(std::make_shared<const Grammar>(grammar_from_json_schema(json::parse(b.schema))));
  int accepted = 0;
  for (const Written& w : short_decimals()) {
    const bool is_integer_text = w.text.find('.') == std::string::npos;
    const bool negative_zero = w.text[0] == '-' && w.thousandths == 0;  // zero is written unsigned
    const bool want = in_range(b, w.thousandths) && (!integer || is_integer_text) && !negative_zero;
    EXPECT_EQ(accepts(start, w.text), want) << b.schema << " on " << w.text;
    accepted += want;
  }
  EXPECT_GT(accepted, 0) << b.schema;
}

TEST(NumberRange, NumbersWithinDecimalBoundsExactly) {
  const Bounds cases[] = {
      {R"({"type": "number", "minimum": 0.5, "maximum": 2.25})", 500, 2250},
      {R"({"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": 0})", -1500, 0, false, false},
      {R"({"type": "number", "minimum": -3.07, "exclusiveMaximum": 7.1})", -3070, 7100, true, false},
      {R"({"type": "number", "exclusiveMinimum": 0})", 0, std::nullopt, false},
      {R"({"type": "number", "maximum": -0.25})", std::nullopt, -250},
      {R"({"type": "number", "minimum": 2, "maximum": 2})", 2000, 2000},
      {R"({"type": "number", "minimum": 1, "exclusiveMinimum": true, "maximum": 1.015})", 1000, 1015, false},
      {R"({"type": "number", "minimum": 1, "exclusiveMinimum": 1.2, "maximum": 9, "exclusiveMaximum": 10})", 1200, 9000,
       false},
  };
  for (const Bounds& b : cases) expect_exact(b, false);
}

TEST(NumberRange, IntegersWithinBoundsExactly) {
  const Bounds cases[] = {
      {R"({"type": "integer", "minimum": -5.5, "maximum": 12.5})", -5500, 12500},
      {R"({"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 3})", -3000, 3000, false, false},
      {R"({"type": "integer", "exclusiveMinimum": -3.5, "exclusiveMaximum": 0})", -3500, 0, false, false},
  };
  for (const Bounds& b : cases) expect_exact(b, true);
}

TEST(NumberRange, BoundsAreReadExactly) {
  const GrammarMatcher big(std::make_shared<const Grammar>(
      grammar_from_json_schema(json::parse(R"({"type": "integer", "minimum": 9007199254740993})"))));
  EXPECT_TRUE(accepts(big, "9007199254740993"));
  EXPECT_FALSE(accepts(big, "9007199254740992"));
  const GrammarMatcher tiny(std::make_shared<const Grammar>(
      grammar_from_json_schema(json::parse(R"({"type": "number", "exclusiveMinimum": 1e-5, "maximum": 0.1})"))));
  EXPECT_TRUE(accepts(tiny, "0.00001000000001"));
  EXPECT_TRUE(accepts(tiny, "0.1"));
  EXPECT_FALSE(accepts(tiny, "0.00001"));
  EXPECT_FALSE(accepts(tiny, "0.000009"));
  EXPECT_FALSE(accepts(tiny, "0.1000000000001"));
  EXPECT_FALSE(accepts(tiny, "1e-4"));  // bounded numbers are written without exponent
  EXPECT_EQ(compare(decimal_of(json::parse("1.5e+20")), decimal_of(json::parse("150000000000000000000"))), 0);
  EXPECT_EQ(decimal_of(json::parse("-0.0")).negative, false);
}

TEST(NumberRange, RandomOutputStaysInRange) {
  const json schema = json::parse(R"({"type": "array", "items": {"anyOf": [
      {"type": "number", "exclusiveMinimum": -1.5, "maximum": 2.25},
      {"type": "integer", "minimum": 100, "exclusiveMaximum": 120}]}, "minItems": 3, "maxItems": 6})");
  const auto g = std::make_shared<const Grammar>(grammar_from_json_schema(schema));
  const auto trie = std::make_shared<const TokenTrie>(test::walk_vocabulary());
  int values = 0;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const test::WalkResult r = test::random_walk(g, trie, seed);
    if (!r.ended) continue;
    nlohmann::json value;
    ASSERT_NO_THROW(value = nlohmann::json::parse(r.text)) << r.text;
    for (const auto& v : value) {
      const double x = v.get<double>();
      EXPECT_TRUE((x > -1.5 && x <= 2.25) || (v.is_number_integer() && x >= 100 && x < 120)) << r.text;
      ++values;
    }
  }
  EXPECT_GE(values, 30);
}

TEST(NumberRange, EmptyRangesNameTheProblem) {
  EXPECT_EQ(test::error_of([] {
              grammar_from_json_schema(json::parse(R"({"type": "number", "exclusiveMinimum": 1, "maximum": 1})"));
            }),
            "json schema at #: the bounds admit no number of at most 18 integer and 15 fraction digits");
  EXPECT_EQ(test::error_of([] {
              grammar_from_json_schema(json::parse(R"({"type": "integer", "minimum": 1.5, "maximum": 1.9})"));
            }),
            "json schema at #: the bounds admit no integer");
  EXPECT_EQ(test::error_of([] { grammar_from_json_schema(json::parse(R"({"type": "number", "minimum": "1"})")); }),
            "json schema at #/minimum: 'minimum' must be a number");
}

}  // namespace
}  // namespace specula::grammar
