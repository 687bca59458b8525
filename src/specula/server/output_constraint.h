#pragma once
// The request fields that constrain output, in every spelling clients send, compiled into one
// grammar (grammar/):
//   response_format {"type": "json_object"} | {"type": "json_schema", "json_schema": {"schema": ...}}
//                   (OpenAI; {"type": "text"} = none)
//   json_schema (llama-server), guided_json (vLLM: an object or JSON text)  -> a JSON Schema
//   grammar (llama-server), guided_grammar (vLLM)                            -> GBNF text
// At most one may be given. Constraint fields that cannot be honoured (guided_regex,
// guided_choice, ...) are refused, never ignored. Every problem is an ApiError (400) naming the
// field and, for schemas and grammars, what is wrong where.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "specula/grammar/grammar.h"

namespace specula::server {

struct OutputConstraint {
  std::shared_ptr<const grammar::Grammar> grammar;  // null when the request has no constraint
  std::string field;                                // the request field it came from
};

OutputConstraint parse_output_constraint(const nlohmann::ordered_json& doc);

}  // namespace specula::server
