#include "specula/server/output_constraint.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/json_schema.h"
#include "specula/server/api_error.h"
#include "specula/util/error.h"

namespace specula::server {
namespace {

using ojson = nlohmann::ordered_json;

// A grammar from a schema or grammar text; specula::Error becomes a 400 naming the field.
template <typename F>
std::shared_ptr<const grammar::Grammar> compile(const std::string& param, F&& build) {
  try {
    return std::make_shared<const grammar::Grammar>(build());
  } catch (const specula::Error& e) {
    throw invalid_request(fmt::format("'{}' is invalid: {}", param, e.what()), param);
  }
}

std::shared_ptr<const grammar::Grammar> from_schema(const ojson& schema, const std::string& param) {
  if (!schema.is_object() && !schema.is_boolean())
    throw invalid_request(fmt::format("'{}' must be a JSON Schema object", param), param);
  return compile(param, [&] { return grammar::grammar_from_json_schema(schema); });
}

std::shared_ptr<const grammar::Grammar> from_gbnf(const ojson& text, const std::string& param) {
  if (!text.is_string()) throw invalid_request(fmt::format("'{}' must be a string (GBNF grammar text)", param), param);
  return compile(param, [&] { return grammar::parse_gbnf(text.get<std::string>()); });
}

std::shared_ptr<const grammar::Grammar> from_response_format(const ojson& rf) {
  if (!rf.is_object()) throw invalid_request("'response_format' must be an object", "response_format");
  const auto type_it = rf.find("type");
  if (type_it == rf.end() || !type_it->is_string())
    throw invalid_request("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"",
                          "response_format.type");
  const std::string type = type_it->get<std::string>();
  if (type == "text") return nullptr;
  if (type == "json_object")
    return compile("response_format", [] { return grammar::parse_gbnf(grammar::json_object_gbnf()); });
  if (type != "json_schema")
    throw invalid_request(fmt::format("'response_format.type' \"{}\" is not supported (\"text\", \"json_object\" or "
                                      "\"json_schema\")",
                                      type),
                          "response_format.type");
  const auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object())
    throw invalid_request("'response_format.json_schema' must be an object with a 'schema'",
                          "response_format.json_schema");
  const auto schema = js->find("schema");
  if (schema == js->end())
    throw invalid_request("'response_format.json_schema.schema' is required", "response_format.json_schema.schema");
  return from_schema(*schema, "response_format.json_schema.schema");
}

}  // namespace

OutputConstraint parse_output_constraint(const ojson& doc) {
  for (const char* refused : {"guided_regex", "guided_choice", "guided_decoding_backend", "structured_outputs"}) {
    if (doc.contains(refused) && !doc[refused].is_null())
      throw invalid_request(fmt::format("'{}' is not supported (use 'response_format', 'json_schema', 'guided_json' "
                                        "or 'grammar')",
                                        refused),
                            refused);
  }
  std::vector<std::string> given;
  std::shared_ptr<const grammar::Grammar> g;
  auto take = [&](const char* name, auto&& build) {
    const auto it = doc.find(name);
    if (it == doc.end() || it->is_null()) return;
    std::shared_ptr<const grammar::Grammar> got = build(*it);
    if (!got) return;  // response_format "text": no constraint
    given.push_back(name);
    g = std::move(got);
  };
  take("response_format", [](const ojson& v) { return from_response_format(v); });
  take("json_schema", [](const ojson& v) { return from_schema(v, "json_schema"); });
  take("guided_json", [](const ojson& v) {
    if (!v.is_string()) return from_schema(v, "guided_json");
    ojson parsed;
    try {
      parsed = ojson::parse(v.get<std::string>());
    } catch (const ojson::exception&) {
      throw invalid_request("'guided_json' is a string that is not JSON", "guided_json");
    }
    return from_schema(parsed, "guided_json");
  });
  take("grammar", [](const ojson& v) { return from_gbnf(v, "grammar"); });
  take("guided_grammar", [](const ojson& v) { return from_gbnf(v, "guided_grammar"); });
  if (given.size() > 1)
    throw invalid_request(fmt::format("only one output constraint may be given, got '{}' and '{}'", given[0], given[1]),
                          given[1]);
  return {std::move(g), given.empty() ? std::string() : given[0]};
}

}  // namespace specula::server
