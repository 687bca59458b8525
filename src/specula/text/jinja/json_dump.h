#pragma once
// Python's json.dumps as Hugging Face's `tojson` filter calls it: non-ASCII characters kept
// (ensure_ascii=False), ", " and ": " separators (",", ": " with an indent), floats as Python
// prints them, insertion-ordered keys unless sort_keys.
#include <optional>
#include <string>

#include "specula/text/jinja/value.h"

namespace specula::jinja {

struct JsonDumpOptions {
  std::optional<std::string> indent;  // nullopt: one line; otherwise the text of one indent level
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Throws OpError for values JSON cannot hold (Undefined, functions, namespaces).
std::string json_dump(const Value& value, const JsonDumpOptions& options);

}  // namespace specula::jinja
