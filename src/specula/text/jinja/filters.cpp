#include "specula/text/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "specula/text/jinja/access.h"
#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/json_dump.h"
#include "specula/text/jinja/operators.h"
#include "specula/text/jinja/string_ops.h"
#include "specula/text/jinja/tests.h"

namespace specula::jinja {
namespace {

using FilterFn = Value (*)(CallArgs& args);

// The filter's parameter at `index` (counting the filtered value as 0) or named `name`.
const Value* param(const CallArgs& a, size_t index, std::string_view name) { return a.get(index, name); }

bool bool_param(const CallArgs& a, size_t index, std::string_view name, bool fallback) {
  const Value* v = param(a, index, name);
  return v ? v->truthy() : fallback;
}

std::optional<std::string> string_param(const CallArgs& a, size_t index, std::string_view name) {
  const Value* v = param(a, index, name);
  if (!v || v->is_none()) return std::nullopt;
  return v->str();
}

const Value& subject(const CallArgs& a) { return a.positional[0]; }

// Jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0 (items before attributes).
Value attribute_path(const Value& value, const std::string& path) {
  Value current = value;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    current = get_item(current, numeric ? Value::from_int(std::stoll(part)) : Value::from_string(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// The key sort/unique/min/max compare by: the attribute if given, lower-cased unless case-sensitive.
Value sort_key(const Value& item, const std::optional<std::string>& attribute, bool case_sensitive) {
  Value key = attribute ? attribute_path(item, *attribute) : item;
  if (!case_sensitive && key.is_string()) key = Value::from_string(py_lower(key.text));
  return key;
}

std::vector<Value> sorted(std::vector<Value> items, const std::optional<std::string>& attribute, bool case_sensitive,
                          bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (auto& item : items) keyed.emplace_back(sort_key(item, attribute, case_sensitive), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? compare(b.first, a.first) < 0 : compare(a.first, b.first) < 0;
  });
  std::vector<Value> out;
  out.reserve(keyed.size());
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

Value list_of(std::vector<Value> items) { return Value::new_list(std::move(items)); }

Value f_default(CallArgs& a) {
  const Value& v = subject(a);
  const Value* fallback = param(a, 1, "default_value");
  const bool boolean = bool_param(a, 2, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return fallback ? *fallback : Value::from_string("");
  return v;
}

Value f_length(CallArgs& a) { return Value::from_int(length_of(subject(a))); }
Value f_string(CallArgs& a) { return Value::from_string(subject(a).str()); }
Value f_upper(CallArgs& a) { return Value::from_string(py_upper(subject(a).str())); }
Value f_lower(CallArgs& a) { return Value::from_string(py_lower(subject(a).str())); }
Value f_title(CallArgs& a) { return Value::from_string(py_title(subject(a).str())); }
Value f_capitalize(CallArgs& a) { return Value::from_string(py_capitalize(subject(a).str())); }
Value f_trim(CallArgs& a) {
  return Value::from_string(py_strip(subject(a).str(), string_param(a, 1, "chars"), true, true));
}
Value f_safe(CallArgs& a) { return subject(a); }
Value f_list(CallArgs& a) { return list_of(iterate(subject(a))); }

Value f_escape(CallArgs& a) {
  std::string out;
  for (char c : subject(a).str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::from_string(out);
}

Value f_join(CallArgs& a) {
  const std::string separator = string_param(a, 1, "d").value_or("");
  const auto attribute = string_param(a, 2, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(subject(a))) {
    if (!first) out += separator;
    first = false;
    out += (attribute ? attribute_path(item, *attribute) : item).str();
  }
  return Value::from_string(out);
}

Value f_first(CallArgs& a) {
  const auto items = iterate(subject(a));
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(CallArgs& a) {
  const auto items = iterate(subject(a));
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_reverse(CallArgs& a) {
  const Value& v = subject(a);
  if (v.is_string()) {
    std::u32string cps = utf8_to_u32(v.text);
    std::reverse(cps.begin(), cps.end());
    return Value::from_string(u32_to_utf8(cps));
  }
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  return list_of(std::move(items));
}

Value f_items(CallArgs& a) {
  const Value& v = subject(a);
  if (v.is_undefined()) return list_of({});
  if (!v.is_dict()) op_fail(fmt::format("items filter needs a mapping, got {}", v.type_name()));
  Value out = Value::new_list();
  for (const auto& [k, val] : v.dict->entries) out.list->items.push_back(Value::new_list({k, val}, true));
  return out;
}

Value f_dictsort(CallArgs& a) {
  const Value& v = subject(a);
  if (!v.is_dict()) op_fail(fmt::format("dictsort filter needs a mapping, got {}", v.type_name()));
  const bool case_sensitive = bool_param(a, 1, "case_sensitive", false);
  const std::string by = string_param(a, 2, "by").value_or("key");
  const bool reverse = bool_param(a, 3, "reverse", false);
  if (by != "key" && by != "value") op_fail("You can only sort by either 'key' or 'value'");
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.dict->entries) pairs.push_back(Value::new_list({k, val}, true));
  return list_of(sorted(std::move(pairs), std::string(by == "key" ? "0" : "1"), case_sensitive, reverse));
}

Value f_sort(CallArgs& a) {
  return list_of(sorted(iterate(subject(a)), string_param(a, 3, "attribute"), bool_param(a, 2, "case_sensitive", false),
                        bool_param(a, 1, "reverse", false)));
}

Value f_unique(CallArgs& a) {
  const bool case_sensitive = bool_param(a, 1, "case_sensitive", false);
  const auto attribute = string_param(a, 2, "attribute");
  std::vector<Value> out, seen;
  for (const Value& item : iterate(subject(a))) {
    Value key = sort_key(item, attribute, case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return list_of(std::move(out));
}

Value min_or_max(CallArgs& a, bool max) {
  const bool case_sensitive = bool_param(a, 1, "case_sensitive", false);
  const auto attribute = string_param(a, 2, "attribute");
  const auto items = iterate(subject(a));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], attribute, case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], attribute, case_sensitive);
    const int c = compare(key, best_key);
    if (max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}
Value f_min(CallArgs& a) { return min_or_max(a, false); }
Value f_max(CallArgs& a) { return min_or_max(a, true); }

Value f_sum(CallArgs& a) {
  const auto attribute = string_param(a, 1, "attribute");
  const Value* start = param(a, 2, "start");
  Value total = start ? *start : Value::from_int(0);
  for (const Value& item : iterate(subject(a)))
    total = binary_op("+", total, attribute ? attribute_path(item, *attribute) : item);
  return total;
}

Value f_map(CallArgs& a) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  for (const auto& [k, v] : a.keywords)
    if (k == "attribute") attribute = &v;
  const auto items = iterate(subject(a));
  if (attribute) {
    const Value* fallback = nullptr;
    for (const auto& [k, v] : a.keywords)
      if (k == "default") fallback = &v;
    for (const Value& item : items) {
      Value v = attribute_path(item, attribute->str());
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return list_of(std::move(out));
  }
  if (a.positional.size() < 2 || !a.positional[1].is_string()) op_fail("map filter needs a filter name or attribute=");
  const std::string filter = a.positional[1].text;
  for (const Value& item : items) {
    CallArgs inner;
    inner.positional.push_back(item);
    inner.positional.insert(inner.positional.end(), a.positional.begin() + 2, a.positional.end());
    inner.keywords = a.keywords;
    out.push_back(apply_filter(filter, inner));
  }
  return list_of(std::move(out));
}

// select/reject/selectattr/rejectattr: `test_at` is the index of the test name in the arguments.
Value select_items(CallArgs& a, bool keep_matching, bool by_attribute) {
  size_t test_at = 1;
  std::optional<std::string> attribute;
  if (by_attribute) {
    if (a.positional.size() < 2) op_fail("selectattr/rejectattr need an attribute name");
    attribute = a.positional[1].str();
    test_at = 2;
  }
  std::optional<std::string> test;
  if (a.positional.size() > test_at) test = a.positional[test_at].str();
  if (test && !has_test(*test)) op_fail(fmt::format("unknown test '{}'", *test));
  std::vector<Value> out;
  for (const Value& item : iterate(subject(a))) {
    const Value value = attribute ? attribute_path(item, *attribute) : item;
    bool matches;
    if (test) {
      CallArgs inner;
      inner.positional.push_back(value);
      inner.positional.insert(inner.positional.end(), a.positional.begin() + static_cast<std::ptrdiff_t>(test_at) + 1,
                              a.positional.end());
      inner.keywords = a.keywords;
      matches = apply_test(*test, inner);
    } else {
      matches = value.truthy();
    }
    if (matches == keep_matching) out.push_back(item);
  }
  return list_of(std::move(out));
}
Value f_select(CallArgs& a) { return select_items(a, true, false); }
Value f_reject(CallArgs& a) { return select_items(a, false, false); }
Value f_selectattr(CallArgs& a) { return select_items(a, true, true); }
Value f_rejectattr(CallArgs& a) { return select_items(a, false, true); }

Value f_tojson(CallArgs& a) {
  JsonDumpOptions options;
  if (const Value* indent = param(a, 1, "indent"); indent && !indent->is_none()) {
    if (indent->kind == Kind::Int) {
      options.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent->integer)), ' ');
    } else {
      options.indent = indent->str();
    }
    options.item_separator = ",";
  }
  if (const Value* separators = param(a, 2, "separators"); separators && separators->is_list()) {
    if (separators->list->items.size() != 2) op_fail("tojson separators must be a pair");
    options.item_separator = separators->list->items[0].str();
    options.key_separator = separators->list->items[1].str();
  }
  options.sort_keys = bool_param(a, 3, "sort_keys", false);
  options.ensure_ascii = bool_param(a, 4, "ensure_ascii", false);
  return Value::from_string(json_dump(subject(a), options));
}

Value f_int(CallArgs& a) {
  const Value& v = subject(a);
  const Value* fallback = param(a, 1, "default");
  const Value deflt = fallback ? *fallback : Value::from_int(0);
  switch (v.kind) {
    case Kind::Int: return v;
    case Kind::Bool: return Value::from_int(v.boolean);
    case Kind::Float: return std::isfinite(v.real) ? Value::from_int(static_cast<int64_t>(std::trunc(v.real))) : deflt;
    case Kind::String: {
      const std::string text = py_strip(v.text, std::nullopt, true, true);
      const Value* base_value = param(a, 2, "base");
      const int base = base_value && base_value->kind == Kind::Int ? static_cast<int>(base_value->integer) : 10;
      try {
        size_t used = 0;
        const long long parsed = std::stoll(text, &used, base);
        if (used == text.size()) return Value::from_int(parsed);
        const double d = std::stod(text, &used);
        if (used == text.size() && std::isfinite(d)) return Value::from_int(static_cast<int64_t>(std::trunc(d)));
      } catch (const std::exception&) {
      }
      return deflt;
    }
    default: return deflt;
  }
}

Value f_float(CallArgs& a) {
  const Value& v = subject(a);
  const Value* fallback = param(a, 1, "default");
  const Value deflt = fallback ? *fallback : Value::from_float(0.0);
  if (v.is_number()) return Value::from_float(v.as_double());
  if (v.is_string()) {
    const std::string text = py_strip(v.text, std::nullopt, true, true);
    try {
      size_t used = 0;
      const double d = std::stod(text, &used);
      if (used == text.size()) return Value::from_float(d);
    } catch (const std::exception&) {
    }
  }
  return deflt;
}

Value f_abs(CallArgs& a) {
  const Value& v = subject(a);
  if (v.kind == Kind::Float) return Value::from_float(std::fabs(v.real));
  if (v.kind == Kind::Int || v.kind == Kind::Bool) {
    const int64_t i = v.kind == Kind::Bool ? v.boolean : v.integer;
    if (i == INT64_MIN) op_fail("abs() of the smallest 64-bit integer does not fit in 64 bits");
    return Value::from_int(i < 0 ? -i : i);
  }
  op_fail(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
}

Value f_round(CallArgs& a) {
  const Value& v = subject(a);
  if (!v.is_number()) op_fail(fmt::format("round filter needs a number, got {}", v.type_name()));
  const Value* precision_value = param(a, 1, "precision");
  const int64_t precision = precision_value && precision_value->kind == Kind::Int ? precision_value->integer : 0;
  const std::string method = string_param(a, 2, "method").value_or("common");
  if (method == "common" && v.kind != Kind::Float && precision >= 0)
    return Value::from_int(v.kind == Kind::Bool ? v.boolean : v.integer);
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double r;
  if (method == "common") {
    r = std::nearbyint(x);  // Python's round(): half to even
  } else if (method == "floor") {
    r = std::floor(x);
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else {
    op_fail("method must be common, ceil or floor");
  }
  return Value::from_float(r / scale);
}

Value f_replace(CallArgs& a) {
  const Value* old = param(a, 1, "old");
  const Value* replacement = param(a, 2, "new");
  if (!old || !replacement) op_fail("replace filter needs the old and new strings");
  const Value* count = param(a, 3, "count");
  return Value::from_string(py_replace(subject(a).str(), old->str(), replacement->str(),
                                       count && count->kind == Kind::Int ? count->integer : -1));
}

Value f_indent(CallArgs& a) {
  const Value* width = param(a, 1, "width");
  std::string indention = "    ";
  if (width)
    indention =
        width->is_string() ? width->text : std::string(static_cast<size_t>(std::max<int64_t>(0, width->integer)), ' ');
  const bool first = bool_param(a, 2, "first", false);
  const bool blank = bool_param(a, 3, "blank", false);
  std::vector<std::string> lines = py_split(subject(a).str() + "\n", std::string("\n"), -1);
  lines.pop_back();  // the piece after the added newline
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
  }
  if (first) out = indention + out;
  return Value::from_string(out);
}

Value f_batch(CallArgs& a) {
  const Value* size_value = param(a, 1, "linecount");
  if (!size_value || size_value->kind != Kind::Int || size_value->integer <= 0)
    op_fail("batch filter needs a positive line count");
  const Value* fill = param(a, 2, "fill_with");
  const auto size = static_cast<size_t>(size_value->integer);
  Value out = Value::new_list();
  std::vector<Value> current;
  for (const Value& item : iterate(subject(a))) {
    current.push_back(item);
    if (current.size() == size) {
      out.list->items.push_back(list_of(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (fill && !fill->is_none())
      while (current.size() < size) current.push_back(*fill);
    out.list->items.push_back(list_of(std::move(current)));
  }
  return out;
}

Value f_wordcount(CallArgs& a) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : subject(a).str()) {
    const bool word_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                           (static_cast<unsigned char>(c) >= 0x80);
    if (word_char && !in_word) ++n;
    in_word = word_char;
  }
  return Value::from_int(n);
}

Value f_format(CallArgs& a) {
  if (!a.keywords.empty()) {
    Value mapping = Value::new_dict();
    for (const auto& [k, v] : a.keywords) mapping.dict->set(Value::from_string(k), v);
    return Value::from_string(percent_format(subject(a).str(), mapping));
  }
  return Value::from_string(percent_format(
      subject(a).str(), Value::new_list(std::vector<Value>(a.positional.begin() + 1, a.positional.end()), true)));
}

Value f_attr(CallArgs& a) {
  const Value* name = param(a, 1, "name");
  if (!name) op_fail("attr filter needs an attribute name");
  return get_attribute(subject(a), name->str());
}

Value f_center(CallArgs& a) {
  const std::string s = subject(a).str();
  const Value* width_value = param(a, 1, "width");
  const auto width = static_cast<size_t>(
      width_value && width_value->kind == Kind::Int ? std::max<int64_t>(0, width_value->integer) : 80);
  const size_t len = code_point_count(s);
  if (width <= len) return Value::from_string(s);
  const size_t total = width - len;
  const size_t left = total / 2 + (total & width & 1);  // Python's str.center rounding
  return Value::from_string(std::string(left, ' ') + s + std::string(total - left, ' '));
}

const std::unordered_map<std::string_view, FilterFn>& filter_registry() {
  static const std::unordered_map<std::string_view, FilterFn> filters = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return filters;
}

}  // namespace

bool has_filter(std::string_view name) { return filter_registry().count(name) != 0; }

Value apply_filter(std::string_view name, CallArgs& args) {
  const auto it = filter_registry().find(name);
  if (it == filter_registry().end()) op_fail(fmt::format("unknown filter '{}'", name));
  if (args.positional.empty()) op_fail(fmt::format("filter '{}' has nothing to filter", name));
  // Undefined input behaves as Jinja's Undefined does inside each filter: an empty string when
  // converted, nothing when iterated.
  return it->second(args);
}

}  // namespace specula::jinja
