#include "specula/text/jinja/access.h"

#include <fmt/format.h>

#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/methods.h"
#include "specula/text/jinja/string_ops.h"

namespace specula::jinja {
namespace {

// Jinja's object_type_repr: how an object is named in "has no attribute" messages.
std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return v.type_name() + " object";
}

Value missing_attribute(const Value& object, const std::string& name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(object), name));
}

Value missing_element(const Value& object, const Value& key) {
  return Value::undefined(fmt::format("{} has no element {}", object_type_repr(object), key.repr()));
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) op_fail(object.text);
  if (!name.empty() && name[0] == '_') {
    if (object.is_dict()) {
      if (const Value* v = object.dict->find(std::string_view(name))) return *v;
    }
    return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe", name, object.type_name()));
  }
  if (object.kind == Kind::Object) {
    if (const Value* v = object.object->attributes.find(std::string_view(name))) return *v;
    return missing_attribute(object, name);
  }
  if (auto method = bound_method(object, name)) return *method;
  if (object.is_dict()) {
    if (const Value* v = object.dict->find(std::string_view(name))) return *v;
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) op_fail(object.text);
  if (object.is_dict()) {
    if (const Value* v = object.dict->find(key)) return *v;
  } else if ((object.is_list() || object.is_string()) && (key.kind == Kind::Int || key.kind == Kind::Bool)) {
    int64_t index = key.kind == Kind::Bool ? key.boolean : key.integer;
    if (object.is_list()) {
      const auto n = static_cast<int64_t>(object.list->items.size());
      if (index < 0) index += n;
      if (index >= 0 && index < n) return object.list->items[static_cast<size_t>(index)];
    } else {
      const std::u32string cps = utf8_to_u32(object.text);
      const auto n = static_cast<int64_t>(cps.size());
      if (index < 0) index += n;
      if (index >= 0 && index < n) return Value::from_string(u32_to_utf8(cps.substr(static_cast<size_t>(index), 1)));
    }
    return missing_element(object, key);
  } else if (object.kind == Kind::Object && key.is_string()) {
    return get_attribute(object, key.text);
  }
  if (key.is_string()) {
    if (!key.text.empty() && key.text[0] != '_') {
      if (auto method = bound_method(object, key.text)) return *method;
    }
    return missing_attribute(object, key.text);
  }
  return missing_element(object, key);
}

Value get_slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
                std::optional<int64_t> step) {
  if (object.is_undefined()) op_fail(object.text);
  if (object.is_list()) {
    const auto& items = object.list->items;
    std::vector<Value> out;
    for (int64_t i : slice_indices(static_cast<int64_t>(items.size()), start, stop, step))
      out.push_back(items[static_cast<size_t>(i)]);
    return Value::new_list(std::move(out), object.list->tuple);
  }
  if (object.is_string()) {
    const std::u32string cps = utf8_to_u32(object.text);
    std::u32string out;
    for (int64_t i : slice_indices(static_cast<int64_t>(cps.size()), start, stop, step))
      out.push_back(cps[static_cast<size_t>(i)]);
    return Value::from_string(u32_to_utf8(out));
  }
  op_fail(fmt::format("'{}' object is not subscriptable", object.type_name()));
}

std::vector<Value> iterate(const Value& value) {
  switch (value.kind) {
    case Kind::Undefined: return {};
    case Kind::List: return value.list->items;
    case Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(value.dict->entries.size());
      for (const auto& entry : value.dict->entries) keys.push_back(entry.first);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> chars;
      std::string current;
      for (char32_t cp : utf8_to_u32(value.text)) {
        current.clear();
        append_utf8(current, cp);
        chars.push_back(Value::from_string(current));
      }
      return chars;
    }
    default: op_fail(fmt::format("'{}' object is not iterable", value.type_name()));
  }
}

int64_t length_of(const Value& value) {
  switch (value.kind) {
    case Kind::Undefined: return 0;
    case Kind::List: return static_cast<int64_t>(value.list->items.size());
    case Kind::Dict: return static_cast<int64_t>(value.dict->entries.size());
    case Kind::String: return static_cast<int64_t>(code_point_count(value.text));
    default: op_fail(fmt::format("object of type '{}' has no len()", value.type_name()));
  }
}

}  // namespace specula::jinja
