// JSON Schema -> grammar: schemas as real clients send them; every random constrained output
// parses and validates (json_schema_check.h), and unsupported or broken schemas name the problem.
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "grammar_walk.h"
#include "json_schema_check.h"
#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/json_schema.h"

namespace specula::grammar {
namespace {

using json = nlohmann::ordered_json;  // the schema's declared property order matters

const json kWeather = json::parse(R"({
  "type": "object",
  "properties": {
    "location": {"type": "string", "description": "City"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14}
  },
  "required": ["location", "unit", "days"],
  "additionalProperties": false
})");

const json kProfile = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
    "address": {
      "type": "object",
      "properties": {"street": {"type": "string"}, "zip": {"type": ["string", "null"]}},
      "required": ["street"]
    },
    "score": {"type": "number"},
    "offset": {"type": "integer", "exclusiveMinimum": -120, "exclusiveMaximum": 7},
    "active": {"type": "boolean", "nullable": true}
  },
  "required": ["name", "tags"]
})");

// pydantic's output for a model with a list of sub-models and an Optional field.
const json kPydanticOrder = json::parse(R"({
  "$defs": {
    "Item": {
      "properties": {
        "id": {"title": "Id", "type": "integer"},
        "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Label"}
      },
      "required": ["id"], "title": "Item", "type": "object"
    }
  },
  "properties": {
    "items": {"items": {"$ref": "#/$defs/Item"}, "title": "Items", "type": "array"},
    "note": {"allOf": [{"$ref": "#/$defs/Item"}]}
  },
  "required": ["items"], "title": "Order", "type": "object"
})");

const json kTree = json::parse(R"({
  "$defs": {
    "node": {
      "type": "object",
      "properties": {
        "value": {"type": "integer", "minimum": -50, "maximum": 50},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}
      },
      "required": ["value", "children"],
      "additionalProperties": false
    }
  },
  "$ref": "#/$defs/node"
})");

const json kMap = json::parse(R"({"type": "object", "additionalProperties": {"type": "integer"}})");

void expect_walks_validate(const json& schema, int walks) {
  const auto g = std::make_shared<const Grammar>(grammar_from_json_schema(schema));
  const auto trie = std::make_shared<const TokenTrie>(test::walk_vocabulary());
  int ended = 0;
  for (int seed = 0; seed < walks; ++seed) {
    const test::WalkResult r = test::random_walk(g, trie, static_cast<uint32_t>(seed));
    if (!r.ended) continue;
    ++ended;
    nlohmann::json value;
    ASSERT_NO_THROW(value = nlohmann::json::parse(r.text)) << r.text;
    EXPECT_EQ(test::schema_violation(value, nlohmann::json::parse(schema.dump())), "") << r.text;
  }
  EXPECT_GE(ended, walks * 3 / 4) << "too few walks reached the end";
}

TEST(JsonSchema, OpenAiStrictWeather) { expect_walks_validate(kWeather, 40); }
TEST(JsonSchema, NestedObjectsArraysOfEnumsOptionalFields) { expect_walks_validate(kProfile, 40); }
TEST(JsonSchema, PydanticDefsRefsAndOptional) { expect_walks_validate(kPydanticOrder, 40); }
TEST(JsonSchema, RecursiveRef) { expect_walks_validate(kTree, 40); }
TEST(JsonSchema, MapOfIntegers) { expect_walks_validate(kMap, 20); }
TEST(JsonSchema, JsonObjectMode) {
  const auto g = std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf()));
  const auto trie = std::make_shared<const TokenTrie>(test::walk_vocabulary());
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const test::WalkResult r = test::random_walk(g, trie, seed);
    if (!r.ended) continue;
    json value;
    ASSERT_NO_THROW(value = json::parse(r.text)) << r.text;
    EXPECT_TRUE(value.is_object()) << r.text;
  }
}

bool accepts(const json& schema, const std::string& text) {
  GrammarMatcher m(std::make_shared<const Grammar>(grammar_from_json_schema(schema)));
  return m.accept_bytes(text) && m.can_end();
}

TEST(JsonSchema, AcceptsAndRejectsExactly) {
  EXPECT_TRUE(accepts(kWeather, R"({"location": "Paris", "unit": "celsius", "days": 14})"));
  EXPECT_FALSE(accepts(kWeather, R"({"location": "Paris", "unit": "celsius", "days": 15})"));
  EXPECT_FALSE(accepts(kWeather, R"({"location": "Paris", "unit": "kelvin", "days": 3})"));
  EXPECT_FALSE(accepts(kWeather, R"({"location": "Paris", "days": 3})"));
  EXPECT_FALSE(accepts(kWeather, R"({"location": "Paris", "unit": "celsius", "days": 3, "x": 1})"));
  EXPECT_TRUE(accepts(kProfile, R"({"name": "Zoé", "tags": ["a", "c"], "offset": -119})"));
  EXPECT_FALSE(accepts(kProfile, R"({"name": "Zoé", "tags": ["a", "c"], "offset": -120})"));
  EXPECT_FALSE(accepts(kProfile, R"({"name": "", "tags": ["a"]})"));
  EXPECT_FALSE(accepts(kProfile, R"({"name": "x", "tags": []})"));
  EXPECT_FALSE(accepts(kProfile, R"({"name": "x", "tags": ["a", "b", "c", "a"]})"));
  EXPECT_TRUE(
      accepts(kProfile, R"({"name": "x", "tags": ["b"], "address": {"street": "Main", "zip": null}, "active": null})"));
  EXPECT_TRUE(accepts(json::parse(R"({"type": "integer", "minimum": 0, "maximum": 1000})"), "1000"));
  EXPECT_FALSE(accepts(json::parse(R"({"type": "integer", "minimum": 0, "maximum": 1000})"), "1001"));
  EXPECT_FALSE(accepts(json::parse(R"({"type": "integer", "minimum": 0})"), "-1"));
  EXPECT_FALSE(accepts(json::parse(R"({"type": "integer", "minimum": 5})"), "05"));
}

TEST(JsonSchema, ErrorsNameTheKeywordAndPath) {
  EXPECT_EQ(test::error_of([] { grammar_from_json_schema(json::parse(R"({"type": "string", "pattern": "^a"})")); }),
            "json schema at #: keyword 'pattern' is not supported");
  EXPECT_EQ(
      test::error_of([] { grammar_from_json_schema(json::parse(R"({"properties": {"a": {"type": "strin"}}})")); }),
      "json schema at #/properties/a/type: unknown type \"strin\"");
  EXPECT_EQ(test::error_of([] { grammar_from_json_schema(json::parse(R"({"$ref": "#/$defs/missing"})")); }),
            "json schema at #/$ref: reference \"#/$defs/missing\" does not resolve");
  EXPECT_EQ(test::error_of([] {
              grammar_from_json_schema(json::parse(R"({"type": "object", "properties": {}, "required": ["x"]})"));
            }),
            "json schema at #/required: required property \"x\" is not in 'properties'");
  EXPECT_EQ(test::error_of([] { grammar_from_json_schema(json::parse(R"({"type": "array", "maxItems": 100000})")); }),
            "json schema at #/maxItems: 'maxItems' 100000 exceeds the supported limit 1000");
  EXPECT_EQ(test::error_of(
                [] { grammar_from_json_schema(json::parse(R"({"type": "integer", "minimum": 5, "maximum": 2})")); }),
            "json schema at #: the bounds admit no integer");
  EXPECT_EQ(test::error_of([] { grammar_from_json_schema(json::parse("[1]")); }),
            "json schema at #: a schema must be an object or a boolean");
  EXPECT_EQ(test::error_of([] {
              grammar_from_json_schema(json::parse(R"({"properties": {"a": {"type": "string", "nullable": 1}}})"));
            }),
            "json schema at #/properties/a/nullable: 'nullable' must be true or false");
  EXPECT_EQ(test::error_of([] { grammar_from_json_schema(json::parse(R"({"$ref": "#"})")); }),
            "grammar: rule 's0-ref--' is left-recursive (it can reach itself without consuming a character)");
}

}  // namespace
}  // namespace specula::grammar
