#include "specula/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include <fmt/ranges.h>

#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/number_range.h"
#include "specula/util/error.h"

namespace specula::grammar {
namespace {

// Ordered: properties are emitted in the order the schema declares them.
using json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxCount = kMaxRepetition;

// Numbers, booleans and null: written alike in JSON and in Gemma's argument syntax.
constexpr const char* kScalarRules = R"(json-integer ::= "-"? ( "0" | [1-9] [0-9]{0,17} )
json-number ::= json-integer ( "." [0-9]+ )? ( [eE] [-+]? [0-9]{1,3} )?
json-boolean ::= "true" | "false"
json-null ::= "null"
)";
// The generic JSON value rules every schema grammar may use. Whitespace is bounded so that a model
// cannot stall in an endless run of blanks.
constexpr const char* kJsonRules = R"(ws ::= [ \t\n]{0,20}
json-char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-string ::= "\"" json-char* "\""
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-member ::= json-string ws ":" ws json-value ws
json-object ::= "{" ws ( json-member ( "," ws json-member )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
)";

// Gemma tool-call arguments: no whitespace, keys bare or delimited, strings between the delimiter
// token {0}. String text never holds "|>" (gemma-text-pipe: after a '|'), so it cannot spell the
// text of <|"|> or <tool_call|>, which the extraction (text/tool_calls.h) would take for the tokens.
constexpr const char* kGemmaRules = R"(ws ::= ""
gemma-string ::= <[{0}]> gemma-text <[{0}]>
gemma-text ::= ( [^|] gemma-text | "|" gemma-text-pipe )?
gemma-text-pipe ::= ( [^|>] gemma-text | "|" gemma-text-pipe )?
gemma-key ::= [A-Za-z_] [A-Za-z0-9_-]{{0,63}} | gemma-string
gemma-value ::= gemma-object | gemma-array | gemma-string | json-number | json-boolean | json-null
gemma-member ::= gemma-key ":" gemma-value
gemma-object ::= "{{" ( gemma-member ( "," gemma-member )* )? "}}"
gemma-array ::= "[" ( gemma-value ( "," gemma-value )* )? "]"
)";

// Keywords that assert something this subset cannot enforce: refusing them keeps a constraint
// from being dropped silently.
const std::set<std::string> kUnsupported = {"pattern",
                                            "not",
                                            "if",
                                            "then",
                                            "else",
                                            "patternProperties",
                                            "prefixItems",
                                            "uniqueItems",
                                            "multipleOf",
                                            "contains",
                                            "minContains",
                                            "maxContains",
                                            "dependentRequired",
                                            "dependentSchemas",
                                            "propertyNames",
                                            "minProperties",
                                            "maxProperties",
                                            "unevaluatedProperties",
                                            "unevaluatedItems",
                                            "additionalItems",
                                            "$dynamicRef",
                                            "$recursiveRef"};

std::string gbnf_literal(const std::string& bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_literal(const json& value) {
  return gbnf_literal(value.dump(-1, ' ', false, json::error_handler_t::strict));
}

// A key the Gemma extraction reads bare: no separators, spaces or delimiter text.
bool is_bare_key(const std::string& key) {
  if (key.empty() || key.find("<|") != std::string::npos || key.find("|>") != std::string::npos) return false;
  return key.find_first_of(":,{}[] \t\n\r") == std::string::npos;
}

std::string gemma_key_literal(const std::string& key, int32_t delimiter) {
  if (is_bare_key(key)) return gbnf_literal(key);
  return fmt::format("<[{0}]> {1} <[{0}]>", delimiter, gbnf_literal(key));
}

// A fixed value (enum, const) in Gemma's argument syntax.
std::string gemma_literal(const json& value, int32_t delimiter) {
  if (value.is_string()) return fmt::format("<[{0}]> {1} <[{0}]>", delimiter, gbnf_literal(value.get<std::string>()));
  if (value.is_object()) {
    std::vector<std::string> members;
    for (const auto& [k, v] : value.items())
      members.push_back(gemma_key_literal(k, delimiter) + " \":\" " + gemma_literal(v, delimiter));
    return fmt::format("\"{{\" {} \"}}\"", fmt::join(members, " \",\" "));
  }
  if (value.is_array()) {
    std::vector<std::string> items;
    for (const json& v : value) items.push_back(gemma_literal(v, delimiter));
    return fmt::format("\"[\" {} \"]\"", fmt::join(items, " \",\" "));
  }
  return json_literal(value);
}

std::string repeat(const std::string& item, uint64_t min, std::optional<uint64_t> max) {
  if (max) return fmt::format("{}{{{},{}}}", item, min, *max);
  return fmt::format("{}{{{},}}", item, min);
}

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, std::string prefix, const ValueSyntax& syntax)
      : root_(root), prefix_(std::move(prefix)), syntax_(syntax) {}

  // "rule ::= ..." and the helper rules, without the base rules.
  std::string compile(const std::string& rule) {
    const std::string body = visit(root_, "#", 0);
    std::string out = rule + " ::= " + body + "\n";
    for (const auto& [name, def] : rules_) out += name + " ::= " + def + "\n";
    return out;
  }

 private:
  [[noreturn]] static void error(const std::string& path, const std::string& what) {
    fail("json schema at {}: {}", path, what);
  }

  std::string new_rule(const std::string& hint, const std::string& body) {
    std::string name = prefix_ + std::to_string(rules_.size()) + "-";
    for (const char c : hint) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (name.size() > 40) name.resize(40);
    rules_.emplace_back(name, body);
    return name;
  }

  // The grammar expression of `schema` (an inline expression or a rule name).
  std::string visit(const json& schema, const std::string& path, int depth) {
    if (depth > kMaxDepth) error(path, fmt::format("nested deeper than {} levels", kMaxDepth));
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) error(path, "the schema 'false' matches nothing");
      return any_value();
    }
    if (!schema.is_object()) error(path, "a schema must be an object or a boolean");
    for (const auto& [key, _] : schema.items())
      if (kUnsupported.contains(key)) error(path, fmt::format("keyword '{}' is not supported", key));
    // Every reading of 'nullable' below is of this schema's, as a boolean.
    if (schema.contains("nullable") && !schema["nullable"].is_boolean())
      error(path + "/nullable", "'nullable' must be true or false");

    if (schema.contains("$ref")) return visit_ref(schema, path, depth);
    if (schema.contains("const")) return with_nullable(schema, literal(schema["const"]));
    if (schema.contains("enum")) return visit_enum(schema, path);
    for (const char* key : {"anyOf", "oneOf"})
      if (schema.contains(key)) return visit_alternatives(schema, key, path, depth);
    if (schema.contains("allOf")) {
      const json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1)
        error(path + "/allOf", "only an allOf of exactly one schema is supported");
      return with_nullable(schema, visit(all[0], path + "/allOf/0", depth + 1));
    }
    if (!schema.contains("type")) {
      // Untyped: infer from the keywords present, else any value.
      if (schema.contains("properties") || schema.contains("additionalProperties") || schema.contains("required"))
        return visit_typed(schema, "object", path, depth);
      if (schema.contains("items")) return visit_typed(schema, "array", path, depth);
      return any_value();
    }
    const json& type = schema["type"];
    std::vector<std::string> types;
    if (type.is_string()) {
      types.push_back(type.get<std::string>());
    } else if (type.is_array() && !type.empty()) {
      for (const json& t : type) {
        if (!t.is_string()) error(path + "/type", "type names must be strings");
        types.push_back(t.get<std::string>());
      }
    } else {
      error(path + "/type", "'type' must be a string or a non-empty array of strings");
    }
    if (schema.value("nullable", false) && std::find(types.begin(), types.end(), "null") == types.end())
      types.push_back("null");
    std::vector<std::string> alts;
    for (const std::string& t : types) alts.push_back(visit_typed(schema, t, path, depth));
    return alts.size() == 1 ? alts[0] : "( " + fmt::format("{}", fmt::join(alts, " | ")) + " )";
  }

  std::string with_nullable(const json& schema, const std::string& expr) {
    return schema.value("nullable", false) ? "( " + expr + " | json-null )" : expr;
  }

  std::string visit_ref(const json& schema, const std::string& path, int depth) {
    const json& ref = schema["$ref"];
    if (!ref.is_string()) error(path + "/$ref", "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = ref_rules_.find(target); it != ref_rules_.end()) return with_nullable(schema, it->second);
    if (target.empty() || target[0] != '#')
      error(path + "/$ref", fmt::format("only local references (\"#...\") are supported, got \"{}\"", target));
    const json* resolved = nullptr;
    try {
      const json::json_pointer pointer(target.substr(1));
      if (root_.contains(pointer)) resolved = &root_.at(pointer);
    } catch (const json::exception&) {
    }
    if (resolved == nullptr) error(path + "/$ref", fmt::format("reference \"{}\" does not resolve", target));
    // Named before it is compiled, so recursive references end at the rule name.
    const size_t slot = rules_.size();
    const std::string name = new_rule("ref-" + target.substr(target.rfind('/') + 1), "");
    ref_rules_.emplace(target, name);
    const std::string body = visit(*resolved, target, depth + 1);
    rules_[slot].second = body;
    return with_nullable(schema, name);
  }

  std::string visit_enum(const json& schema, const std::string& path) {
    const json& values = schema["enum"];
    if (!values.is_array() || values.empty()) error(path + "/enum", "'enum' must be a non-empty array");
    std::vector<std::string> alts;
    for (const json& v : values) alts.push_back(literal(v));
    if (schema.value("nullable", false)) alts.push_back("json-null");
    return "( " + fmt::format("{}", fmt::join(alts, " | ")) + " )";
  }

  std::string visit_alternatives(const json& schema, const char* key, const std::string& path, int depth) {
    const json& list = schema[key];
    if (!list.is_array() || list.empty()) error(path + "/" + key, fmt::format("'{}' must be a non-empty array", key));
    // Sibling keywords (e.g. "type" next to anyOf) would have to hold as well: not supported.
    std::vector<std::string> alts;
    for (size_t i = 0; i < list.size(); ++i)
      alts.push_back(visit(list[i], fmt::format("{}/{}/{}", path, key, i), depth + 1));
    if (schema.value("nullable", false)) alts.push_back("json-null");
    return "( " + fmt::format("{}", fmt::join(alts, " | ")) + " )";
  }

  std::string visit_typed(const json& schema, const std::string& type, const std::string& path, int depth) {
    if (type == "object") return visit_object(schema, path, depth);
    if (type == "array") return visit_array(schema, path, depth);
    if (type == "string") return visit_string(schema, path);
    if (type == "integer") return visit_integer(schema, path);
    if (type == "number") return visit_number(schema, path);
    if (type == "boolean") return "json-boolean";
    if (type == "null") return "json-null";
    error(path + "/type", fmt::format("unknown type \"{}\"", type));
  }

  std::optional<uint64_t> count(const json& schema, const char* key, const std::string& path) {
    if (!schema.contains(key)) return std::nullopt;
    const json& v = schema[key];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      error(path + "/" + key, fmt::format("'{}' must be a non-negative integer", key));
    const uint64_t n = v.get<uint64_t>();
    if (n > kMaxCount)
      error(path + "/" + key, fmt::format("'{}' {} exceeds the supported limit {}", key, n, kMaxCount));
    return n;
  }

  std::string visit_object(const json& schema, const std::string& path, int depth) {
    const json empty = json::object();
    const json& props = schema.contains("properties") ? schema["properties"] : empty;
    if (!props.is_object()) error(path + "/properties", "'properties' must be an object");
    std::set<std::string> required;
    if (schema.contains("required")) {
      const json& req = schema["required"];
      if (!req.is_array()) error(path + "/required", "'required' must be an array of names");
      for (const json& r : req) {
        if (!r.is_string()) error(path + "/required", "'required' must be an array of names");
        if (!props.contains(r.get<std::string>()))
          error(path + "/required",
                fmt::format("required property \"{}\" is not in 'properties'", r.get<std::string>()));
        required.insert(r.get<std::string>());
      }
    }
    const json additional =
        schema.contains("additionalProperties") ? schema["additionalProperties"] : json(props.empty());
    std::string extra_value;  // empty: no further members
    if (additional.is_boolean()) {
      if (additional.get<bool>()) extra_value = any_value();
    } else if (additional.is_object()) {
      extra_value = visit(additional, path + "/additionalProperties", depth + 1);
    } else {
      error(path + "/additionalProperties", "'additionalProperties' must be a boolean or a schema");
    }
    if (props.empty()) {
      if (extra_value.empty()) return "\"{\" ws \"}\"";
      const std::string member = new_rule("member", any_key() + " ws \":\" ws " + extra_value + " ws");
      return fmt::format("\"{{\" ws ( {0} ( \",\" ws {0} )* )? \"}}\"", member);
    }
    // Members in declared order; an optional member may be skipped. The first one written has no
    // comma: one alternative per member that may come first.
    std::vector<std::pair<std::string, bool>> members;  // rule, required
    for (const auto& [name, sub] : props.items()) {
      const std::string value = visit(sub, path + "/properties/" + name, depth + 1);
      const std::string rule = new_rule("prop-" + name, key_literal(name) + " ws \":\" ws " + value + " ws");
      members.emplace_back(rule, required.contains(name));
    }
    std::string extras;
    if (!extra_value.empty()) {
      const std::string member = new_rule("extra", any_key() + " ws \":\" ws " + extra_value + " ws");
      extras = fmt::format(" ( \",\" ws {} )*", member);
    }
    auto tail_after = [&](size_t first) {
      std::string s;
      for (size_t j = first + 1; j < members.size(); ++j)
        s += members[j].second ? fmt::format(" \",\" ws {}", members[j].first)
                               : fmt::format(" ( \",\" ws {} )?", members[j].first);
      return s + extras;
    };
    std::vector<std::string> alts;
    for (size_t i = 0; i < members.size(); ++i) {
      alts.push_back(members[i].first + tail_after(i));
      if (members[i].second) break;  // a required member cannot be skipped
    }
    const bool all_optional = required.empty();
    std::string body = "( " + fmt::format("{}", fmt::join(alts, " | ")) + " )";
    if (all_optional) {
      if (!extra_value.empty()) {
        const std::string member = new_rule("extra", any_key() + " ws \":\" ws " + extra_value + " ws");
        body = "( " + body + " | " + member + extras + " )";
      }
      body += "?";
    }
    return new_rule("object", "\"{\" ws " + body + " \"}\"");
  }

  std::string visit_array(const json& schema, const std::string& path, int depth) {
    const std::string item =
        schema.contains("items") ? visit(schema["items"], path + "/items", depth + 1) : any_value();
    const uint64_t min = count(schema, "minItems", path).value_or(0);
    const std::optional<uint64_t> max = count(schema, "maxItems", path);
    if (max && *max < min) error(path, fmt::format("maxItems {} is below minItems {}", *max, min));
    if (max && *max == 0) return "\"[\" ws \"]\"";
    const std::string element = new_rule("item", item + " ws");
    const std::string more = repeat(new_rule("more", "\",\" ws " + element), min > 0 ? min - 1 : 0,
                                    max ? std::optional<uint64_t>(*max - 1) : std::nullopt);
    std::string body = element + " " + more;
    if (min == 0) body = "( " + body + " )?";
    return new_rule("array", "\"[\" ws " + body + " \"]\"");
  }

  std::string visit_string(const json& schema, const std::string& path) {
    const uint64_t min = count(schema, "minLength", path).value_or(0);
    const std::optional<uint64_t> max = count(schema, "maxLength", path);
    if (max && *max < min) error(path, fmt::format("maxLength {} is below minLength {}", *max, min));
    if (gemma()) return min == 0 && !max ? "gemma-string" : gemma_bounded_string(min, max);
    if (min == 0 && !max) return "json-string";
    return "\"\\\"\" " + repeat("json-char", min, max) + " \"\\\"\"";
  }

  // A Gemma string of min to max characters: rule k (o: after a character other than '|', p: after
  // a '|') has k characters written, so the "|>" exclusion of gemma-text holds while counting.
  std::string gemma_bounded_string(uint64_t min, std::optional<uint64_t> max) {
    const uint64_t counted = max.value_or(min);
    std::string o = max ? "\"\"" : "gemma-text";
    std::string p = max ? "\"\"" : "gemma-text-pipe";
    for (uint64_t k = counted; k-- > 0;) {
      const std::string optional = k >= min ? "?" : "";
      const std::string next_o = new_rule("text", fmt::format("( [^|] {} | \"|\" {} ){}", o, p, optional));
      p = new_rule("text-pipe", fmt::format("( [^|>] {} | \"|\" {} ){}", o, p, optional));
      o = next_o;
    }
    return fmt::format("<[{0}]> {1} <[{0}]>", syntax_.string_delimiter, o);
  }

  bool gemma() const { return syntax_.kind == ValueSyntax::Kind::GemmaArguments; }
  std::string any_value() const { return gemma() ? "gemma-value" : "json-value"; }
  std::string any_key() const { return gemma() ? "gemma-key" : "json-string"; }
  std::string literal(const json& value) const {
    return gemma() ? gemma_literal(value, syntax_.string_delimiter) : json_literal(value);
  }
  std::string key_literal(const std::string& key) const {
    return gemma() ? gemma_key_literal(key, syntax_.string_delimiter) : json_literal(json(key));
  }

  // The tighter of `minimum` (inclusive unless draft 4's exclusiveMinimum: true) and a numeric
  // exclusiveMinimum (2019+); likewise for the upper bound.
  std::optional<DecimalBound> bound(const json& schema, const char* inclusive_key, const char* exclusive_key,
                                    bool lower, const std::string& path) {
    std::optional<DecimalBound> result;
    auto tighten = [&](const char* key, bool inclusive) {
      if (!schema[key].is_number()) error(path + "/" + key, fmt::format("'{}' must be a number", key));
      const Decimal value = decimal_of(schema[key]);
      const int c = result ? compare(value, result->value) : 0;
      if (!result || (lower ? c > 0 : c < 0) || (c == 0 && !inclusive)) result = DecimalBound{value, inclusive};
    };
    const bool draft4_exclusive = schema.contains(exclusive_key) && schema[exclusive_key].is_boolean();
    if (schema.contains(inclusive_key))
      tighten(inclusive_key, !(draft4_exclusive && schema[exclusive_key].get<bool>()));
    if (schema.contains(exclusive_key) && !draft4_exclusive) tighten(exclusive_key, false);
    return result;
  }

  bool has_bounds(const json& schema) {
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (schema.contains(k)) return true;
    return false;
  }

  std::string visit_integer(const json& schema, const std::string& path) {
    if (!has_bounds(schema)) return "json-integer";
    const auto range = integer_bounds(bound(schema, "minimum", "exclusiveMinimum", true, path),
                                      bound(schema, "maximum", "exclusiveMaximum", false, path));
    if (!range) error(path, "the bounds admit no integer");
    return new_rule("integer", integer_range_gbnf(range->first, range->second));
  }

  // Bounded numbers are written without exponent (number_range.h), so the bounds hold exactly.
  std::string visit_number(const json& schema, const std::string& path) {
    if (!has_bounds(schema)) return "json-number";
    const std::optional<std::string> range =
        number_range_gbnf(bound(schema, "minimum", "exclusiveMinimum", true, path),
                          bound(schema, "maximum", "exclusiveMaximum", false, path));
    if (!range)
      error(path, fmt::format("the bounds admit no number of at most {} integer and {} fraction digits",
                              kMaxIntegerDigits, kMaxFractionDigits));
    return new_rule("number", *range);
  }

  const json& root_;
  const std::string prefix_;
  const ValueSyntax syntax_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> ref_rules_;
};

}  // namespace

std::string json_schema_rules(const json& schema, const std::string& rule, const std::string& prefix,
                              const ValueSyntax& syntax) {
  return SchemaCompiler(schema, prefix, syntax).compile(rule);
}

std::string value_base_rules(const ValueSyntax& syntax) {
  if (syntax.kind == ValueSyntax::Kind::Json) return std::string(kJsonRules) + kScalarRules;
  if (syntax.string_delimiter < 0) fail("json schema: Gemma's argument syntax needs the string delimiter token");
  return fmt::format(fmt::runtime(kGemmaRules), syntax.string_delimiter) + kScalarRules;
}

std::string json_schema_to_gbnf(const json& schema) {
  return json_schema_rules(schema, "root", "s", ValueSyntax{}) + value_base_rules(ValueSyntax{});
}

Grammar grammar_from_json_schema(const json& schema) { return parse_gbnf(json_schema_to_gbnf(schema)); }

std::string json_object_gbnf() { return "root ::= json-object\n" + value_base_rules(ValueSyntax{}); }

}  // namespace specula::grammar
