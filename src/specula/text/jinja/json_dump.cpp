#include "specula/text/jinja/json_dump.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/string_ops.h"

namespace specula::jinja {
namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t cp : utf8_to_u32(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
        } else if (cp < 0x80 || !ensure_ascii) {
          append_utf8(out, cp);
        } else if (cp < 0x10000) {
          out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
        } else {
          const uint32_t v = static_cast<uint32_t>(cp) - 0x10000;
          out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        }
    }
  }
  out.push_back('"');
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return python_float_repr(d);
}

std::string key_text(const Value& key) {
  switch (key.kind) {
    case Kind::String: return key.text;
    case Kind::Int: return std::to_string(key.integer);
    case Kind::Float: return float_json(key.real);
    case Kind::Bool: return key.boolean ? "true" : "false";
    case Kind::None: return "null";
    default: op_fail(fmt::format("keys must be str, int, float, bool or None, not {}", key.type_name()));
  }
}

// Past this depth a value is an error (Python: "Circular reference detected"), not a stack overflow.
constexpr int kMaxJsonDepth = 200;

void dump(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  if (level > kMaxJsonDepth)
    op_fail(fmt::format("cannot serialize a value nested deeper than {} levels (circular reference?)", kMaxJsonDepth));
  auto newline = [&](int depth) {
    out.push_back('\n');
    for (int i = 0; i < depth; ++i) out += *o.indent;
  };
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.boolean ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.integer); return;
    case Kind::Float: out += float_json(v.real); return;
    case Kind::String: dump_string(out, v.text, o.ensure_ascii); return;
    case Kind::List: {
      if (v.list->items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < v.list->items.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent) newline(level + 1);
        dump(out, v.list->items[i], o, level + 1);
      }
      if (o.indent) newline(level);
      out.push_back(']');
      return;
    }
    case Kind::Dict: {
      if (v.dict->entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : v.dict->entries) entries.emplace_back(key_text(k), &val);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent) newline(level + 1);
        dump_string(out, entries[i].first, o.ensure_ascii);
        out += o.key_separator;
        dump(out, *entries[i].second, o, level + 1);
      }
      if (o.indent) newline(level);
      out.push_back('}');
      return;
    }
    default: op_fail(fmt::format("Object of type {} is not JSON serializable", v.type_name()));
  }
}

}  // namespace

std::string json_dump(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  dump(out, value, options, 0);
  return out;
}

}  // namespace specula::jinja
