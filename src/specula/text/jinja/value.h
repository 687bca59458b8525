#pragma once
// The values a Jinja template computes with, modelled on the Python objects Jinja2 sees when
// Hugging Face renders a chat template: None, bool, int, float, str, list/tuple, dict (insertion
// ordered), namespace/loop objects, callables, and Jinja's Undefined. Containers are shared by
// reference, as in Python, so `list.append` and `set ns.x = ...` are visible through every name.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace specula::jinja {

struct Value;
struct List;
struct Dict;
struct Object;
struct Function;

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Object, Function };

struct Value {
  Kind kind = Kind::Undefined;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  // The text of a String; for Undefined, the message Jinja raises when the value is misused.
  std::string text;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Object> object;
  std::shared_ptr<Function> function;

  static Value undefined(std::string hint);
  static Value none();
  static Value from_bool(bool b);
  static Value from_int(int64_t i);
  static Value from_float(double d);
  static Value from_string(std::string s);
  static Value new_list(std::vector<Value> items = {}, bool tuple = false);
  static Value new_dict();
  static Value from_function(std::string name, std::function<Value(struct CallArgs&)> fn);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }

  // Python truthiness (Undefined is false).
  bool truthy() const;
  // Numeric value of a bool/int/float (caller checks is_number()).
  double as_double() const;
  // Python's str(): what `{{ value }}` prints. Undefined prints as the empty string.
  std::string str() const;
  // Python's repr(): used for the items of printed lists and dicts.
  std::string repr() const;
  // The Python type name used in error messages: 'str', 'int', 'dict', 'NoneType', ...
  std::string type_name() const;
};

struct List {
  std::vector<Value> items;
  bool tuple = false;  // prints as (a, b); otherwise behaves like a list
};

struct Dict {
  std::vector<std::pair<Value, Value>> entries;  // insertion order, like a Python dict
  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
};

// Attribute-only objects: Jinja's namespace() and the loop variable.
struct Object {
  std::string type;  // "Namespace" or "LoopContext"
  Dict attributes;
  bool assignable = false;  // only namespaces accept `set obj.attr = ...`
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;

  // The argument at `index` or named `name` (keyword wins), or nullptr when absent.
  const Value* get(size_t index, std::string_view name) const;
  // Fails when a keyword is not one of `allowed` (names the callee in the message).
  void check_keywords(std::string_view callee, std::initializer_list<std::string_view> allowed) const;
};

struct Function {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

// Whether `v` is, or holds through lists, dicts and objects, the container at `container`. Values
// are shared by reference and freed by reference counts, so a container made to hold itself
// (`set ns.x = ns`, `l.append(l)`) would never be freed and would print forever: the mutations
// refuse it. A bound list or dict method (`l.append`) counts as reaching every container: it holds
// its own where this walk cannot see.
bool reaches(const Value& v, const void* container);

// Python equality (1 == 1.0 == True; containers compare element-wise; Undefined == Undefined).
bool equals(const Value& a, const Value& b);
// Python ordering for sort/compare: numbers with numbers, strings with strings, lists
// lexicographically; other pairs throw OpError like Python's TypeError. Returns <0, 0, >0.
int compare(const Value& a, const Value& b);

// JSON (insertion ordered, as the caller wrote it) to a template value.
Value from_json(const nlohmann::ordered_json& json);

// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string python_float_repr(double value);

}  // namespace specula::jinja
