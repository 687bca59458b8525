#pragma once
// Shared plumbing for the tokenizer component factories: JSON field access with paths in the error
// messages, the "unsupported component" error, and literal string patterns.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace specula::text {

// Where a component sits in tokenizer.json, for error messages ("normalizer.normalizers[1]").
struct JsonPath {
  const std::string* source = nullptr;  // the file
  std::string path;

  JsonPath field(std::string_view key) const { return {source, path + "." + std::string(key)}; }
  JsonPath index(size_t i) const { return {source, path + "[" + std::to_string(i) + "]"}; }
};

// Throws specula::Error: "<file>: <path>: <what>".
[[noreturn]] void json_fail(const JsonPath& at, const std::string& what);

// Throws the error for a component type specula does not implement, naming the type, its JSON path
// and the types that are supported at that place.
[[noreturn]] void unsupported_component(const JsonPath& at, const std::string& type, std::string_view supported);

// The object's "type" string (throws if missing or not a string).
std::string component_type(const nlohmann::json& j, const JsonPath& at);

// Required member of an object, with a path in the error.
const nlohmann::json& json_member(const nlohmann::json& j, const char* key, const JsonPath& at);
std::string json_string(const nlohmann::json& j, const char* key, const JsonPath& at);
bool json_bool(const nlohmann::json& j, const char* key, const JsonPath& at, bool fallback);

// A pattern {"String": "..."}; {"Regex": ...} throws as unsupported (specula has no regex engine for
// tokenizer patterns; Gemma uses only literal strings).
std::string literal_pattern(const nlohmann::json& pattern, const JsonPath& at);

// Non-overlapping occurrences of `pattern` in `text`, left to right, as [begin, end) byte ranges.
void find_literal(std::string_view text, std::string_view pattern, std::vector<std::pair<size_t, size_t>>& out);

// Replaces every non-overlapping occurrence of `pattern` with `content`.
std::string replace_literal(std::string_view text, std::string_view pattern, std::string_view content);

}  // namespace specula::text
