#pragma once
// A small JSON Schema validator for the tests (the subset grammar/json_schema.h compiles), written
// independently of the grammar so that generated output is checked by different code.
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace specula::test {

// Empty when `value` satisfies `schema`, else the first violation with its path.
inline std::string schema_violation(const nlohmann::json& value, const nlohmann::json& schema,
                                    const nlohmann::json& root, const std::string& path = "$") {
  using json = nlohmann::json;
  if (schema.is_boolean()) return schema.get<bool>() ? "" : path + ": schema false";
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    return schema_violation(value, root.at(json::json_pointer(ref.substr(1))), root, path);
  }
  if (schema.value("nullable", false) && value.is_null()) return "";
  if (schema.contains("const") && value != schema["const"]) return path + ": not the const";
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found = found || e == value;
    if (!found) return path + ": not in the enum";
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    int matched = 0;
    for (const json& s : schema[key]) matched += schema_violation(value, s, root, path).empty();
    if (matched == 0) return path + ": matches no " + key + " branch";
  }
  if (schema.contains("allOf"))
    for (const json& s : schema["allOf"])
      if (auto v = schema_violation(value, s, root, path); !v.empty()) return v;
  if (schema.contains("type")) {
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool ok = false;
    for (const json& t : types) {
      const std::string n = t;
      ok = ok || (n == "object" && value.is_object()) || (n == "array" && value.is_array()) ||
           (n == "string" && value.is_string()) || (n == "boolean" && value.is_boolean()) ||
           (n == "null" && value.is_null()) || (n == "number" && value.is_number()) ||
           (n == "integer" && value.is_number_integer());
    }
    if (!ok) return path + ": wrong type " + value.dump();
  }
  if (value.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& r : schema.value("required", json::array()))
      if (!value.contains(r.get<std::string>())) return path + ": missing " + r.get<std::string>();
    for (const auto& [k, v] : value.items()) {
      if (props.contains(k)) {
        if (auto e = schema_violation(v, props[k], root, path + "." + k); !e.empty()) return e;
      } else if (schema.contains("additionalProperties")) {
        const json& ap = schema["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>()) return path + ": unexpected property " + k;
        if (ap.is_object())
          if (auto e = schema_violation(v, ap, root, path + "." + k); !e.empty()) return e;
      } else if (!props.empty()) {
        return path + ": unexpected property " + k;  // the compiler's default for listed properties
      }
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) return path + ": too few items";
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>())
      return path + ": too many items";
    if (schema.contains("items"))
      for (size_t i = 0; i < value.size(); ++i)
        if (auto e = schema_violation(value[i], schema["items"], root, path + "[" + std::to_string(i) + "]");
            !e.empty())
          return e;
  }
  if (value.is_string()) {
    size_t code_points = 0;
    for (const unsigned char c : value.get<std::string>()) code_points += (c & 0xC0) != 0x80;
    if (schema.contains("minLength") && code_points < schema["minLength"].get<size_t>()) return path + ": too short";
    if (schema.contains("maxLength") && code_points > schema["maxLength"].get<size_t>()) return path + ": too long";
  }
  if (value.is_number_integer() && schema.value("type", json()) == "integer") {
    const auto v = value.get<int64_t>();
    if (schema.contains("minimum") && v < schema["minimum"].get<double>()) return path + ": below minimum";
    if (schema.contains("maximum") && v > schema["maximum"].get<double>()) return path + ": above maximum";
    if (schema.contains("exclusiveMinimum") && v <= schema["exclusiveMinimum"].get<double>())
      return path + ": not above exclusiveMinimum";
    if (schema.contains("exclusiveMaximum") && v >= schema["exclusiveMaximum"].get<double>())
      return path + ": not below exclusiveMaximum";
  }
  return "";
}

inline std::string schema_violation(const nlohmann::json& value, const nlohmann::json& schema) {
  return schema_violation(value, schema, schema);
}

}  // namespace specula::test
