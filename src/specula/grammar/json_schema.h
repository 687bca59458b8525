#pragma once
// JSON Schema -> grammar (GBNF text, gbnf_parser.h), for constrained JSON output. The subset real
// clients send (OpenAI structured outputs, pydantic, zod):
//   type (one or an array, e.g. ["string", "null"]), nullable: true, enum, const, {} / true (any
//   value); object: properties (emitted in their declared order), required, additionalProperties
//   (false or absent: only the listed properties; true or a schema: further members after them;
//   an object without properties and additionalProperties a schema: a map); array: items,
//   minItems, maxItems; string: minLength, maxLength, format (an annotation, not checked);
//   integer, number: minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact, number_range.h:
//   bounded numbers are written without exponent, with at most 18 integer and 15 fraction digits);
//   anyOf / oneOf (as alternatives: oneOf's exclusivity is not checked); allOf of one schema;
//   $ref to "#", "#/$defs/..." or "#/definitions/..." (recursive schemas allowed).
// Assertions outside the subset (pattern, not, if/then/else, patternProperties, prefixItems,
// uniqueItems, multipleOf, ...) throw specula::Error naming the keyword and its location, so a
// constraint is never dropped silently; annotations (title, description, default, ...) are ignored.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "specula/grammar/grammar.h"

namespace specula::grammar {

// The grammar text of `schema` (root rule "root"). Throws specula::Error naming the schema path.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
Grammar grammar_from_json_schema(const nlohmann::ordered_json& schema);

// How a schema's values are written: JSON, or the arguments of a Gemma 4 tool call
// (text/tool_calls.h, tool_call_grammar.h): no whitespace, keys bare (between <|"|> when they hold
// separators), strings between the <|"|> token matched by id, enum and const values likewise.
// Gemma string text never holds "|>", so it cannot spell the text of <|"|> or <tool_call|>.
struct ValueSyntax {
  enum class Kind : uint8_t { Json, GemmaArguments };
  Kind kind = Kind::Json;
  int32_t string_delimiter = -1;  // GemmaArguments: the <|"|> token id
};

// For grammars that hold several schemas: "rule ::= ..." with helper rules named "<prefix>N-...",
// without the base rules (value_base_rules) they refer to. Throws specula::Error like the above.
std::string json_schema_rules(const nlohmann::ordered_json& schema, const std::string& rule, const std::string& prefix,
                              const ValueSyntax& syntax);
std::string value_base_rules(const ValueSyntax& syntax);

// Any JSON object (OpenAI's response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace specula::grammar
