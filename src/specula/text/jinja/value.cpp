#include "specula/text/jinja/value.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "specula/text/jinja/errors.h"

namespace specula::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.kind = Kind::Undefined;
  v.text = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}

Value Value::from_bool(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.boolean = b;
  return v;
}

Value Value::from_int(int64_t i) {
  Value v;
  v.kind = Kind::Int;
  v.integer = i;
  return v;
}

Value Value::from_float(double d) {
  Value v;
  v.kind = Kind::Float;
  v.real = d;
  return v;
}

Value Value::from_string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.text = std::move(s);
  return v;
}

Value Value::new_list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.list = std::make_shared<List>();
  v.list->items = std::move(items);
  v.list->tuple = tuple;
  return v;
}

Value Value::new_dict() {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<Dict>();
  return v;
}

Value Value::from_function(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.kind = Kind::Function;
  v.function = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
  return v;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return boolean;
    case Kind::Int: return integer != 0;
    case Kind::Float: return real != 0.0;
    case Kind::String: return !text.empty();
    case Kind::List: return !list->items.empty();
    case Kind::Dict: return !dict->entries.empty();
    case Kind::Object:
    case Kind::Function: return true;
  }
  return false;
}

double Value::as_double() const {
  switch (kind) {
    case Kind::Bool: return boolean ? 1.0 : 0.0;
    case Kind::Int: return static_cast<double>(integer);
    case Kind::Float: return real;
    default: op_fail(fmt::format("expected a number, got {}", type_name()));
  }
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci = [-]d[.ddd]e(+|-)XX
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  const int exponent = std::stoi(sci.substr(e + 1));
  const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  return sign + out;
}

static std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0xA0) {
      // U+0080..U+00A0 are not printable for Python's repr.
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i + 1]));
      ++i;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back(quote);
  return out;
}

std::string Value::str() const {
  switch (kind) {
    case Kind::Undefined: return "";
    case Kind::String: return text;
    default: return repr();
  }
}

namespace {
// repr() recurses into lists, dicts and objects; a value that contains itself (`set ns.x = ns`)
// or is nested absurdly deep would overflow the stack. Past this depth it is an error instead.
constexpr int kMaxReprDepth = 200;
thread_local int repr_depth = 0;

struct ReprLevel {
  ReprLevel() {
    if (repr_depth >= kMaxReprDepth)
      op_fail(
          fmt::format("cannot print a value nested deeper than {} levels (does it contain itself?)", kMaxReprDepth));
    ++repr_depth;
  }
  ~ReprLevel() { --repr_depth; }
  ReprLevel(const ReprLevel&) = delete;
  ReprLevel& operator=(const ReprLevel&) = delete;
};
}  // namespace

std::string Value::repr() const {
  const bool container = kind == Kind::List || kind == Kind::Dict || kind == Kind::Object;
  std::optional<ReprLevel> level;
  if (container) level.emplace();
  switch (kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "None";
    case Kind::Bool: return boolean ? "True" : "False";
    case Kind::Int: return std::to_string(integer);
    case Kind::Float: return python_float_repr(real);
    case Kind::String: return string_repr(text);
    case Kind::List: {
      std::string out = list->tuple ? "(" : "[";
      for (size_t i = 0; i < list->items.size(); ++i) {
        if (i) out += ", ";
        out += list->items[i].repr();
      }
      if (list->tuple && list->items.size() == 1) out += ",";
      out += list->tuple ? ")" : "]";
      return out;
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict->entries) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::Object: {
      Value as_dict = new_dict();
      *as_dict.dict = object->attributes;
      return "<" + object->type + " " + as_dict.repr() + ">";
    }
    case Kind::Function: return "<function " + function->name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return list->tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Object: return object->type;
    case Kind::Function: return "function";
  }
  return "";
}

const Value* Dict::find(const Value& key) const {
  for (const auto& entry : entries)
    if (equals(entry.first, key)) return &entry.second;
  return nullptr;
}

Value* Dict::find(const Value& key) {
  for (auto& entry : entries)
    if (equals(entry.first, key)) return &entry.second;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& entry : entries)
    if (entry.first.kind == Kind::String && entry.first.text == key) return &entry.second;
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  if (Value* existing = find(key)) {
    *existing = std::move(value);
  } else {
    entries.emplace_back(key, std::move(value));
  }
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keywords)
    if (k == name) return &v;
  if (index < positional.size()) return &positional[index];
  return nullptr;
}

void CallArgs::check_keywords(std::string_view callee, std::initializer_list<std::string_view> allowed) const {
  for (const auto& kw : keywords) {
    bool ok = false;
    for (auto a : allowed) ok = ok || kw.first == a;
    if (!ok) op_fail(fmt::format("{}() got an unexpected keyword argument '{}'", callee, kw.first));
  }
}

bool reaches(const Value& v, const void* container) {
  std::vector<const Value*> todo = {&v};
  std::unordered_set<const void*> seen;
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    // A bound list or dict method holds its container where this walk cannot see it: refused
    // as if it closed a cycle (templates have no reason to store one).
    if (x->kind == Kind::Function && (x->function->name.starts_with("list.") || x->function->name.starts_with("dict.")))
      return true;
    const void* id = x->kind == Kind::List     ? static_cast<const void*>(x->list.get())
                     : x->kind == Kind::Dict   ? static_cast<const void*>(x->dict.get())
                     : x->kind == Kind::Object ? static_cast<const void*>(x->object.get())
                                               : nullptr;
    if (id == nullptr) continue;
    if (id == container) return true;
    if (!seen.insert(id).second) continue;
    if (x->kind == Kind::List) {
      for (const Value& item : x->list->items) todo.push_back(&item);
    } else {
      const Dict& d = x->kind == Kind::Dict ? *x->dict : x->object->attributes;
      for (const auto& [k, val] : d.entries) {
        todo.push_back(&k);
        todo.push_back(&val);
      }
    }
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Kind::Float && b.kind != Kind::Float) {
      const int64_t x = a.kind == Kind::Bool ? a.boolean : a.integer;
      const int64_t y = b.kind == Kind::Bool ? b.boolean : b.integer;
      return x == y;
    }
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.text == b.text;
    case Kind::List: {
      if (a.list == b.list) return true;
      if (a.list->items.size() != b.list->items.size() || a.list->tuple != b.list->tuple) return false;
      for (size_t i = 0; i < a.list->items.size(); ++i)
        if (!equals(a.list->items[i], b.list->items[i])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [k, v] : a.dict->entries) {
        const Value* other = b.dict->find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Kind::Object: return a.object == b.object;
    case Kind::Function: return a.function == b.function;
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Kind::Float && b.kind != Kind::Float) {
      const int64_t x = a.kind == Kind::Bool ? a.boolean : a.integer;
      const int64_t y = b.kind == Kind::Bool ? b.boolean : b.integer;
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.text.compare(b.text);  // UTF-8 byte order equals code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list->items;
    const auto& y = b.list->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  op_fail(fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()));
}

Value from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::from_bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::from_int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::from_float(static_cast<double>(u));
      return Value::from_int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::from_float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::from_string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Value list = Value::new_list();
      list.list->items.reserve(json.size());
      for (const auto& item : json) list.list->items.push_back(from_json(item));
      return list;
    }
    case nlohmann::ordered_json::value_t::object: {
      Value dict = Value::new_dict();
      dict.dict->entries.reserve(json.size());
      for (const auto& [k, v] : json.items()) dict.dict->entries.emplace_back(Value::from_string(k), from_json(v));
      return dict;
    }
    default: return Value::none();  // binary / discarded: not produced by JSON text
  }
}

}  // namespace specula::jinja
