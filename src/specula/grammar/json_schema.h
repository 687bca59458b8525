#pragma once
// JSON Schema -> grammar (GBNF text, gbnf_parser.h), for constrained JSON output. The subset real
// clients send (OpenAI structured outputs, pydantic, zod):
//   type (one or an array, e.g. ["string", "null"]), nullable: true, enum, const, {} / true (any
//   value); object: properties (emitted in their declared order), required, additionalProperties
//   (false or absent: only the listed properties; true or a schema: further members after them;
//   an object without properties and additionalProperties a schema: a map); array: items,
//   minItems, maxItems; string: minLength, maxLength, format (an annotation, not checked);
//   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact, within the int64 range);
//   number: the same bounds restrict the sign and integer digits only (see docs/api.md);
//   anyOf / oneOf (as alternatives: oneOf's exclusivity is not checked); allOf of one schema;
//   $ref to "#", "#/$defs/..." or "#/definitions/..." (recursive schemas allowed).
// Assertions outside the subset (pattern, not, if/then/else, patternProperties, prefixItems,
// uniqueItems, multipleOf, ...) throw specula::Error naming the keyword and its location, so a
// constraint is never dropped silently; annotations (title, description, default, ...) are ignored.
#include <string>

#include <nlohmann/json.hpp>

#include "specula/grammar/grammar.h"

namespace specula::grammar {

// The grammar text of `schema` (root rule "root"). Throws specula::Error naming the schema path.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
Grammar grammar_from_json_schema(const nlohmann::ordered_json& schema);

// Any JSON object (OpenAI's response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace specula::grammar
