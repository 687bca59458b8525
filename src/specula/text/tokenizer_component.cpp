#include "specula/text/tokenizer_component.h"

#include "specula/util/error.h"

namespace specula::text {

void json_fail(const JsonPath& at, const std::string& what) {
  fail("{}: {}: {}", at.source ? *at.source : std::string("tokenizer.json"), at.path, what);
}

void unsupported_component(const JsonPath& at, const std::string& type, std::string_view supported) {
  json_fail(at, fmt::format("component type \"{}\" is not supported by specula (supported here: {})", type, supported));
}

std::string component_type(const nlohmann::json& j, const JsonPath& at) {
  if (!j.is_object()) json_fail(at, fmt::format("expected an object, got {}", j.type_name()));
  const auto it = j.find("type");
  if (it == j.end() || !it->is_string()) json_fail(at, "missing string field \"type\"");
  return it->get<std::string>();
}

const nlohmann::json& json_member(const nlohmann::json& j, const char* key, const JsonPath& at) {
  if (!j.is_object()) json_fail(at, fmt::format("expected an object, got {}", j.type_name()));
  const auto it = j.find(key);
  if (it == j.end()) json_fail(at, fmt::format("missing field \"{}\"", key));
  return *it;
}

std::string json_string(const nlohmann::json& j, const char* key, const JsonPath& at) {
  const nlohmann::json& v = json_member(j, key, at);
  if (!v.is_string()) json_fail(at.field(key), fmt::format("expected a string, got {}", v.type_name()));
  return v.get<std::string>();
}

bool json_bool(const nlohmann::json& j, const char* key, const JsonPath& at, bool fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) json_fail(at.field(key), fmt::format("expected a boolean, got {}", it->type_name()));
  return it->get<bool>();
}

std::string literal_pattern(const nlohmann::json& pattern, const JsonPath& at) {
  if (pattern.is_string()) return pattern.get<std::string>();
  if (!pattern.is_object() || pattern.size() != 1) json_fail(at, "expected {\"String\": ...} or {\"Regex\": ...}");
  if (const auto it = pattern.find("String"); it != pattern.end()) {
    if (!it->is_string()) json_fail(at.field("String"), "expected a string");
    return it->get<std::string>();
  }
  if (pattern.contains("Regex")) unsupported_component(at, "Regex pattern", "String patterns");
  json_fail(at, "expected {\"String\": ...} or {\"Regex\": ...}");
}

void find_literal(std::string_view text, std::string_view pattern, std::vector<std::pair<size_t, size_t>>& out) {
  out.clear();
  if (pattern.empty()) return;
  size_t pos = 0;
  while ((pos = text.find(pattern, pos)) != std::string_view::npos) {
    out.emplace_back(pos, pos + pattern.size());
    pos += pattern.size();
  }
}

std::string replace_literal(std::string_view text, std::string_view pattern, std::string_view content) {
  if (pattern.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(pattern, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(content);
    pos = hit + pattern.size();
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace specula::text
