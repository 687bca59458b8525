#include "specula/text/jinja/tests.h"

#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/filters.h"
#include "specula/text/jinja/operators.h"
#include "specula/text/jinja/string_ops.h"

namespace specula::jinja {
namespace {

using TestFn = bool (*)(const Value& value, const CallArgs& args);

const Value& argument(const CallArgs& args, std::string_view test) {
  if (args.positional.size() < 2) op_fail(fmt::format("test '{}' needs an argument", test));
  return args.positional[1];
}

const std::unordered_map<std::string_view, TestFn>& test_registry() {
  static const std::unordered_map<std::string_view, TestFn> tests = {
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) { return v.is_none(); }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_string(); }},
      {"number", [](const Value& v, const CallArgs&) { return v.is_number(); }},
      {"integer", [](const Value& v, const CallArgs&) { return v.kind == Kind::Int; }},
      {"float", [](const Value& v, const CallArgs&) { return v.kind == Kind::Float; }},
      {"boolean", [](const Value& v, const CallArgs&) { return v.kind == Kind::Bool; }},
      {"true", [](const Value& v, const CallArgs&) { return v.kind == Kind::Bool && v.boolean; }},
      {"false", [](const Value& v, const CallArgs&) { return v.kind == Kind::Bool && !v.boolean; }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.is_dict(); }},
      // Jinja: anything with len() and [] (so strings and dicts too; Undefined also qualifies).
      {"sequence",
       [](const Value& v, const CallArgs&) { return v.is_list() || v.is_string() || v.is_dict() || v.is_undefined(); }},
      {"iterable",
       [](const Value& v, const CallArgs&) { return v.is_list() || v.is_string() || v.is_dict() || v.is_undefined(); }},
      {"callable", [](const Value& v, const CallArgs&) { return v.kind == Kind::Function; }},
      {"odd",
       [](const Value& v, const CallArgs&) {
         if (v.kind != Kind::Int && v.kind != Kind::Bool)
           op_fail(fmt::format("test 'odd' needs an integer, got {}", v.type_name()));
         return binary_op("%", v, Value::from_int(2)).integer == 1;
       }},
      {"even",
       [](const Value& v, const CallArgs&) {
         if (v.kind != Kind::Int && v.kind != Kind::Bool)
           op_fail(fmt::format("test 'even' needs an integer, got {}", v.type_name()));
         return binary_op("%", v, Value::from_int(2)).integer == 0;
       }},
      {"divisibleby",
       [](const Value& v, const CallArgs& a) {
         const Value r = binary_op("%", v, argument(a, "divisibleby"));
         return r.as_double() == 0.0;
       }},
      {"eq", [](const Value& v, const CallArgs& a) { return equals(v, argument(a, "eq")); }},
      {"ne", [](const Value& v, const CallArgs& a) { return !equals(v, argument(a, "ne")); }},
      {"lt", [](const Value& v, const CallArgs& a) { return compare(v, argument(a, "lt")) < 0; }},
      {"le", [](const Value& v, const CallArgs& a) { return compare(v, argument(a, "le")) <= 0; }},
      {"gt", [](const Value& v, const CallArgs& a) { return compare(v, argument(a, "gt")) > 0; }},
      {"ge", [](const Value& v, const CallArgs& a) { return compare(v, argument(a, "ge")) >= 0; }},
      {"in", [](const Value& v, const CallArgs& a) { return contains(argument(a, "in"), v); }},
      {"sameas",
       [](const Value& v, const CallArgs& a) {
         const Value& o = argument(a, "sameas");
         if (v.kind != o.kind) return false;
         switch (v.kind) {
           case Kind::List: return v.list == o.list;
           case Kind::Dict: return v.dict == o.dict;
           case Kind::Object: return v.object == o.object;
           case Kind::Function: return v.function == o.function;
           default: return equals(v, o);
         }
       }},
      {"lower", [](const Value& v, const CallArgs&) { return py_is_lower(v.str()); }},
      {"upper", [](const Value& v, const CallArgs&) { return py_is_upper(v.str()); }},
      {"escaped", [](const Value&, const CallArgs&) { return false; }},
      {"filter", [](const Value& v, const CallArgs&) { return v.is_string() && has_filter(v.text); }},
      {"test", [](const Value& v, const CallArgs&) { return v.is_string() && has_test(v.text); }},
  };
  return tests;
}

std::string_view canonical(std::string_view name) {
  if (name == "equalto" || name == "==") return "eq";
  if (name == "!=") return "ne";
  if (name == "lessthan" || name == "<") return "lt";
  if (name == "<=") return "le";
  if (name == "greaterthan" || name == ">") return "gt";
  if (name == ">=") return "ge";
  return name;
}

}  // namespace

bool has_test(std::string_view name) { return test_registry().count(canonical(name)) != 0; }

bool apply_test(std::string_view name, const CallArgs& args) {
  const auto it = test_registry().find(canonical(name));
  if (it == test_registry().end()) op_fail(fmt::format("unknown test '{}'", name));
  if (args.positional.empty()) op_fail(fmt::format("test '{}' has nothing to test", name));
  return it->second(args.positional[0], args);
}

}  // namespace specula::jinja
