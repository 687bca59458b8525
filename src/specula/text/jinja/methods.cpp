#include "specula/text/jinja/methods.h"

#include <fmt/format.h>

#include "specula/text/jinja/access.h"
#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/string_ops.h"

namespace specula::jinja {
namespace {

std::string arg_string(const CallArgs& args, size_t index, std::string_view method, std::string_view param) {
  const Value* v = args.get(index, param);
  if (!v || !v->is_string()) {
    op_fail(fmt::format("{}() argument '{}' must be str, not {}", method, param, v ? v->type_name() : "nothing"));
  }
  return v->text;
}

std::optional<std::string> optional_string(const CallArgs& args, size_t index, std::string_view method,
                                           std::string_view param) {
  const Value* v = args.get(index, param);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string())
    op_fail(fmt::format("{}() argument '{}' must be str or None, not {}", method, param, v->type_name()));
  return v->text;
}

int64_t optional_int(const CallArgs& args, size_t index, std::string_view param, int64_t fallback) {
  const Value* v = args.get(index, param);
  if (!v || v->is_none()) return fallback;
  if (v->kind != Kind::Int) op_fail(fmt::format("argument '{}' must be int, not {}", param, v->type_name()));
  return v->integer;
}

Value string_list(const std::vector<std::string>& parts) {
  Value out = Value::new_list();
  for (const auto& p : parts) out.list->items.push_back(Value::from_string(p));
  return out;
}

// str.format with `{}`, `{0}` and `{name}` fields (no format specs).
std::string str_format(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '{' && i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
    } else if (c == '}' && i + 1 < format.size() && format[i + 1] == '}') {
      out.push_back('}');
      ++i;
    } else if (c == '{') {
      const size_t close = format.find('}', i);
      if (close == std::string::npos) op_fail("Single '{' encountered in format string");
      const std::string field = format.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!") != std::string::npos)
        op_fail(fmt::format("format field '{{{}}}' uses an unsupported format spec", field));
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
        ++auto_index;
      } else if (field.find_first_not_of("0123456789") == std::string::npos) {
        const size_t index = std::stoul(field);
        v = index < args.positional.size() ? &args.positional[index] : nullptr;
      } else {
        for (const auto& [k, val] : args.keywords)
          if (k == field) v = &val;
      }
      if (!v) op_fail(fmt::format("format field '{{{}}}' has no matching argument", field));
      out += v->str();
      i = close;
    } else if (c == '}') {
      op_fail("Single '}' encountered in format string");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool affix_matches(const Value* affix, const std::string& text, bool prefix, std::string_view method) {
  if (!affix) op_fail(fmt::format("{}() takes at least 1 argument (0 given)", method));
  auto one = [&](const Value& a) {
    if (!a.is_string())
      op_fail(fmt::format("{} first arg must be str or a tuple of str, not {}", method, a.type_name()));
    if (a.text.size() > text.size()) return false;
    return prefix ? text.compare(0, a.text.size(), a.text) == 0
                  : text.compare(text.size() - a.text.size(), a.text.size(), a.text) == 0;
  };
  if (affix->is_list()) {
    for (const auto& a : affix->list->items)
      if (one(a)) return true;
    return false;
  }
  return one(*affix);
}

std::optional<Value> string_method(const Value& self, const std::string& name) {
  const std::string s = self.text;
  auto make = [&](std::function<Value(CallArgs&)> fn) { return Value::from_function("str." + name, std::move(fn)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return make([s, left, right, name](CallArgs& a) {
      return Value::from_string(py_strip(s, optional_string(a, 0, name, "chars"), left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    return make([s](CallArgs& a) {
      return string_list(py_split(s, optional_string(a, 0, "split", "sep"), optional_int(a, 1, "maxsplit", -1)));
    });
  }
  if (name == "splitlines") {
    return make([s](CallArgs&) {
      std::vector<std::string> lines = py_split(s, std::string("\n"), -1);
      if (!lines.empty() && lines.back().empty()) lines.pop_back();
      for (auto& l : lines)
        if (!l.empty() && l.back() == '\r') l.pop_back();
      return string_list(lines);
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return make([s, prefix, name](CallArgs& a) {
      return Value::from_bool(affix_matches(a.get(0, "prefix"), s, prefix, name));
    });
  }
  if (name == "upper") return make([s](CallArgs&) { return Value::from_string(py_upper(s)); });
  if (name == "lower") return make([s](CallArgs&) { return Value::from_string(py_lower(s)); });
  if (name == "title") return make([s](CallArgs&) { return Value::from_string(py_title(s)); });
  if (name == "capitalize") return make([s](CallArgs&) { return Value::from_string(py_capitalize(s)); });
  if (name == "replace") {
    return make([s](CallArgs& a) {
      return Value::from_string(py_replace(s, arg_string(a, 0, "replace", "old"), arg_string(a, 1, "replace", "new"),
                                           optional_int(a, 2, "count", -1)));
    });
  }
  if (name == "format") return make([s](CallArgs& a) { return Value::from_string(str_format(s, a)); });
  if (name == "join") {
    return make([s](CallArgs& a) {
      const Value* items = a.get(0, "iterable");
      if (!items) op_fail("join() takes exactly one argument (0 given)");
      std::string out;
      bool first = true;
      for (const Value& item : iterate(*items)) {
        if (!item.is_string()) op_fail(fmt::format("sequence item: expected str instance, {} found", item.type_name()));
        if (!first) out += s;
        first = false;
        out += item.text;
      }
      return Value::from_string(out);
    });
  }
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return make([s, find, name](CallArgs& a) {
      const std::string needle = arg_string(a, 0, name, "sub");
      if (find) {
        const size_t at = s.find(needle);
        return Value::from_int(at == std::string::npos ? -1 : static_cast<int64_t>(code_point_count(s.substr(0, at))));
      }
      if (needle.empty()) return Value::from_int(static_cast<int64_t>(code_point_count(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
      return Value::from_int(n);
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper") {
    return make([s, name](CallArgs&) {
      if (s.empty()) return Value::from_bool(false);
      bool ok = true;
      for (char c : s) {
        const bool digit = c >= '0' && c <= '9', lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
        if (name == "isdigit") ok = ok && digit;
        if (name == "isalpha") ok = ok && (lower || upper);
        if (name == "isalnum") ok = ok && (lower || upper || digit);
        if (name == "isspace") ok = ok && is_py_space(c);
      }
      if (name == "islower") return Value::from_bool(py_is_lower(s));
      if (name == "isupper") return Value::from_bool(py_is_upper(s));
      return Value::from_bool(ok);
    });
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const Value& self, const std::string& name) {
  const auto dict = self.dict;
  auto make = [&](std::function<Value(CallArgs&)> fn) { return Value::from_function("dict." + name, std::move(fn)); };
  if (name == "items") {
    return make([dict](CallArgs&) {
      Value out = Value::new_list();
      for (const auto& [k, v] : dict->entries) out.list->items.push_back(Value::new_list({k, v}, true));
      return out;
    });
  }
  if (name == "keys" || name == "values") {
    const bool keys = name == "keys";
    return make([dict, keys](CallArgs&) {
      Value out = Value::new_list();
      for (const auto& [k, v] : dict->entries) out.list->items.push_back(keys ? k : v);
      return out;
    });
  }
  if (name == "get") {
    return make([dict](CallArgs& a) {
      const Value* key = a.get(0, "key");
      if (!key) op_fail("get expected at least 1 argument, got 0");
      if (const Value* v = dict->find(*key)) return *v;
      const Value* fallback = a.get(1, "default");
      return fallback ? *fallback : Value::none();
    });
  }
  if (name == "copy") {
    return make([dict](CallArgs&) {
      Value out = Value::new_dict();
      *out.dict = *dict;
      return out;
    });
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  const auto list = self.list;
  auto make = [&](std::function<Value(CallArgs&)> fn) { return Value::from_function("list." + name, std::move(fn)); };
  if (list->tuple && name != "index" && name != "count") return std::nullopt;
  if (name == "append") {
    return make([list](CallArgs& a) {
      if (a.positional.size() != 1)
        op_fail(fmt::format("append() takes exactly one argument ({} given)", a.positional.size()));
      if (reaches(a.positional[0], list.get())) op_fail("append(): a list cannot contain itself");
      list->items.push_back(a.positional[0]);
      return Value::none();
    });
  }
  if (name == "extend") {
    return make([list](CallArgs& a) {
      if (a.positional.size() != 1 || !a.positional[0].is_list()) op_fail("extend() takes exactly one list argument");
      const auto items = a.positional[0].list->items;
      for (const Value& item : items) {
        if (reaches(item, list.get())) op_fail("extend(): a list cannot contain itself");
      }
      list->items.insert(list->items.end(), items.begin(), items.end());
      return Value::none();
    });
  }
  if (name == "pop") {
    return make([list](CallArgs& a) {
      if (list->items.empty()) op_fail("pop from empty list");
      int64_t index = optional_int(a, 0, "index", -1);
      const auto n = static_cast<int64_t>(list->items.size());
      if (index < 0) index += n;
      if (index < 0 || index >= n) op_fail("pop index out of range");
      Value v = list->items[static_cast<size_t>(index)];
      list->items.erase(list->items.begin() + index);
      return v;
    });
  }
  if (name == "index" || name == "count") {
    const bool index = name == "index";
    return make([list, index](CallArgs& a) {
      if (a.positional.empty()) op_fail("list method expects an argument");
      int64_t n = 0;
      for (size_t i = 0; i < list->items.size(); ++i) {
        if (!equals(list->items[i], a.positional[0])) continue;
        if (index) return Value::from_int(static_cast<int64_t>(i));
        ++n;
      }
      if (index) op_fail(fmt::format("{} is not in list", a.positional[0].repr()));
      return Value::from_int(n);
    });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> bound_method(const Value& object, const std::string& name) {
  switch (object.kind) {
    case Kind::String: return string_method(object, name);
    case Kind::Dict: return dict_method(object, name);
    case Kind::List: return list_method(object, name);
    default: return std::nullopt;
  }
}

}  // namespace specula::jinja
