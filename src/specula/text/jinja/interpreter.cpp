#include "specula/text/jinja/interpreter.h"

#include <unordered_map>

#include <fmt/format.h>

#include "specula/text/jinja/access.h"
#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/filters.h"
#include "specula/text/jinja/operators.h"
#include "specula/text/jinja/tests.h"

namespace specula::jinja {
namespace {

// Variables visible to a piece of template. `for` iterations, macro calls and `with` blocks get
// their own scope; `if` does not (as in Jinja, a `set` inside a loop does not leak out of it).
struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child_of(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { Normal, Break, Continue };

constexpr int64_t kMaxRangeItems = 10'000'000;

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options) : options_(options) {}

  std::string render(const Body& body, const Value& context) {
    auto builtins = std::make_shared<Scope>();
    install_globals(*builtins);
    auto root = child_of(builtins);
    if (context.is_dict()) {
      for (const auto& [k, v] : context.dict->entries) root->vars[k.str()] = v;
    }
    std::string out;
    exec_body(body, root, out);
    return out;
  }

 private:
  // ---- globals ----

  void install_globals(Scope& scope) {
    scope.vars["range"] = Value::from_function("range", [](CallArgs& a) {
      a.check_keywords("range", {});
      std::vector<int64_t> n;
      for (const auto& v : a.positional) {
        if (v.kind != Kind::Int && v.kind != Kind::Bool)
          op_fail(fmt::format("'{}' object cannot be interpreted as an integer", v.type_name()));
        n.push_back(v.kind == Kind::Bool ? v.boolean : v.integer);
      }
      if (n.empty() || n.size() > 3) op_fail(fmt::format("range expected 1 to 3 arguments, got {}", n.size()));
      const int64_t start = n.size() == 1 ? 0 : n[0], stop = n.size() == 1 ? n[0] : n[1],
                    step = n.size() == 3 ? n[2] : 1;
      if (step == 0) op_fail("range() arg 3 must not be zero");
      const int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                     : (start > stop ? (start - stop - step - 1) / -step : 0);
      if (count > kMaxRangeItems)
        op_fail(fmt::format("range() of {} items exceeds the limit of {}", count, kMaxRangeItems));
      Value out = Value::new_list();
      out.list->items.reserve(static_cast<size_t>(count));
      for (int64_t i = 0, v = start; i < count; ++i, v += step) out.list->items.push_back(Value::from_int(v));
      return out;
    });
    scope.vars["namespace"] = Value::from_function("namespace", [](CallArgs& a) {
      Value ns;
      ns.kind = Kind::Object;
      ns.object = std::make_shared<Object>();
      ns.object->type = "Namespace";
      ns.object->assignable = true;
      for (const auto& p : a.positional) {
        if (!p.is_dict()) op_fail("namespace() positional arguments must be mappings");
        for (const auto& [k, v] : p.dict->entries) ns.object->attributes.set(k, v);
      }
      for (const auto& [k, v] : a.keywords) ns.object->attributes.set(Value::from_string(k), v);
      return ns;
    });
    scope.vars["dict"] = Value::from_function("dict", [](CallArgs& a) {
      Value out = Value::new_dict();
      for (const auto& p : a.positional) {
        if (!p.is_dict()) op_fail("dict() positional arguments must be mappings");
        for (const auto& [k, v] : p.dict->entries) out.dict->set(k, v);
      }
      for (const auto& [k, v] : a.keywords) out.dict->set(Value::from_string(k), v);
      return out;
    });
    scope.vars["raise_exception"] = Value::from_function("raise_exception", [](CallArgs& a) -> Value {
      const Value* message = a.get(0, "message");
      throw RaisedError(message ? message->str() : std::string("raise_exception() called"));
    });
    scope.vars["strftime_now"] = Value::from_function("strftime_now", [this](CallArgs& a) {
      const Value* format = a.get(0, "format");
      if (!format || !format->is_string()) op_fail("strftime_now() needs a format string");
      std::tm now{};
      if (options_.now) {
        now = options_.now();
      } else {
        const std::time_t t = std::time(nullptr);
        localtime_r(&t, &now);
      }
      char buffer[512];
      const size_t n = std::strftime(buffer, sizeof buffer, format->text.c_str(), &now);
      if (n == 0 && !format->text.empty())
        op_fail(fmt::format("strftime_now('{}') produced no text or too much", format->text));
      return Value::from_string(std::string(buffer, n));
    });
  }

  // ---- statements ----

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const auto& stmt : body) {
      const Flow flow = exec(*stmt, scope, out);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
    try {
      return exec_inner(s, scope, out);
    } catch (const OpError& e) {
      throw TemplateError(s.line, e.message);
    }
  }

  Flow exec_inner(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case StmtKind::Text: out += s.text; return Flow::Normal;
      case StmtKind::Output: out += eval(*s.expr, scope).str(); return Flow::Normal;
      case StmtKind::If:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond, scope).truthy()) return exec_body(body, scope, out);
        return exec_body(s.else_body, scope, out);
      case StmtKind::For: return exec_for(s, scope, out);
      case StmtKind::Set: {
        Value value = eval(*s.expr, scope);
        if (!s.attribute.empty()) {
          Value target = lookup(s.targets[0], scope);
          if (target.kind != Kind::Object || !target.object->assignable) {
            op_fail(fmt::format("cannot assign attribute on non-namespace object '{}'", s.targets[0]));
          }
          if (reaches(value, target.object.get()))
            op_fail(fmt::format("cannot assign '{}' to an attribute of itself (a namespace cannot contain itself)",
                                s.targets[0]));
          target.object->attributes.set(Value::from_string(s.attribute), std::move(value));
        } else {
          assign_targets(s.targets, value, *scope);
        }
        return Flow::Normal;
      }
      case StmtKind::SetBlock: {
        std::string captured;
        exec_body(s.body, child_of(scope), captured);
        scope->vars[s.targets[0]] = apply_filter_chain(s.filters, Value::from_string(std::move(captured)), scope);
        return Flow::Normal;
      }
      case StmtKind::Macro: scope->vars[s.text] = make_macro(s, scope); return Flow::Normal;
      case StmtKind::CallBlock: {
        const Expr& call = *s.expr;
        Value callee = eval(*call.object, scope);
        CallArgs args = eval_args(call.items, call.kwargs, scope);
        const Stmt* block = &s;
        args.keywords.emplace_back("caller", Value::from_function("caller", [this, block, scope](CallArgs& a) {
                                     auto inner = child_of(scope);
                                     bind_params(block->params, a, *inner, "caller");
                                     std::string text;
                                     exec_body(block->body, inner, text);
                                     return Value::from_string(std::move(text));
                                   }));
        out += call_value(callee, args).str();
        return Flow::Normal;
      }
      case StmtKind::FilterBlock: {
        std::string captured;
        exec_body(s.body, scope, captured);
        out += apply_filter_chain(s.filters, Value::from_string(std::move(captured)), scope).str();
        return Flow::Normal;
      }
      case StmtKind::With: {
        auto inner = child_of(scope);
        for (const auto& [name, expr] : s.assignments) inner->vars[name] = eval(*expr, scope);
        return exec_body(s.body, inner, out);
      }
      case StmtKind::Scope: return exec_body(s.body, child_of(scope), out);
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  static void assign_targets(const std::vector<std::string>& targets, const Value& value, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = value;
      return;
    }
    if (!value.is_list()) op_fail(fmt::format("cannot unpack non-iterable {} object", value.type_name()));
    const auto& items = value.list->items;
    if (items.size() != targets.size()) {
      op_fail(fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
  }

  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    const Value iterable = eval(*s.expr, scope);
    std::vector<Value> items = iterate(iterable);
    if (s.filter_condition) {
      std::vector<Value> kept;
      for (auto& item : items) {
        auto probe = child_of(scope);
        assign_targets(s.targets, item, *probe);
        if (eval(*s.filter_condition, probe).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec_body(s.else_body, scope, out);
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      auto iteration = child_of(scope);
      assign_targets(s.targets, items[static_cast<size_t>(i)], *iteration);
      iteration->vars["loop"] = make_loop(items, i);
      const Flow flow = exec_body(s.body, iteration, out);
      if (flow == Flow::Break) break;
    }
    return Flow::Normal;
  }

  static Value make_loop(const std::vector<Value>& items, int64_t i) {
    const auto n = static_cast<int64_t>(items.size());
    Value loop;
    loop.kind = Kind::Object;
    loop.object = std::make_shared<Object>();
    loop.object->type = "LoopContext";
    Dict& a = loop.object->attributes;
    auto set = [&](const char* name, Value v) { a.entries.emplace_back(Value::from_string(name), std::move(v)); };
    set("index", Value::from_int(i + 1));
    set("index0", Value::from_int(i));
    set("revindex", Value::from_int(n - i));
    set("revindex0", Value::from_int(n - i - 1));
    set("first", Value::from_bool(i == 0));
    set("last", Value::from_bool(i == n - 1));
    set("length", Value::from_int(n));
    // Only recursive loops nest depth in Jinja; a plain loop inside another is depth 1 too.
    set("depth", Value::from_int(1));
    set("depth0", Value::from_int(0));
    set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    set("cycle", Value::from_function("loop.cycle", [i](CallArgs& args) {
          if (args.positional.empty()) op_fail("no items for cycling given");
          return args.positional[static_cast<size_t>(i) % args.positional.size()];
        }));
    return loop;
  }

  Value apply_filter_chain(const std::vector<FilterCall>& filters, Value value, const ScopePtr& scope) {
    for (const auto& f : filters) {
      try {
        CallArgs args = eval_args(f.args, f.kwargs, scope);
        args.positional.insert(args.positional.begin(), std::move(value));
        value = apply_filter(f.name, args);
      } catch (const OpError& e) {
        throw TemplateError(f.line, e.message);
      }
    }
    return value;
  }

  // ---- macros ----

  void bind_params(const std::vector<MacroParam>& params, CallArgs& args, Scope& scope, const std::string& name) {
    Value varargs = Value::new_list({}, true);
    Value kwargs = Value::new_dict();
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) {
        scope.vars[params[i].name] = args.positional[i];
      } else {
        varargs.list->items.push_back(args.positional[i]);
      }
    }
    for (auto& [key, value] : args.keywords) {
      if (key == "caller") {
        scope.vars["caller"] = value;
        continue;
      }
      bool matched = false;
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].name != key) continue;
        if (i < args.positional.size())
          op_fail(fmt::format("macro '{}' got multiple values for argument '{}'", name, key));
        scope.vars[key] = value;
        matched = true;
      }
      if (!matched) kwargs.dict->set(Value::from_string(key), value);
    }
    auto self = std::shared_ptr<Scope>(&scope, [](Scope*) {});  // defaults see earlier parameters
    for (size_t i = args.positional.size(); i < params.size(); ++i) {
      if (scope.vars.count(params[i].name)) continue;
      scope.vars[params[i].name] =
          params[i].default_value ? eval(*params[i].default_value, self)
                                  : Value::undefined(fmt::format("parameter '{}' was not provided", params[i].name));
    }
    scope.vars["varargs"] = std::move(varargs);
    scope.vars["kwargs"] = std::move(kwargs);
  }

  Value make_macro(const Stmt& s, const ScopePtr& closure) {
    const Stmt* macro = &s;
    // The closure is held weakly: a macro stored in its own scope must not keep that scope alive.
    std::weak_ptr<Scope> weak = closure;
    return Value::from_function(s.text, [this, macro, weak](CallArgs& args) {
      ScopePtr parent = weak.lock();
      if (!parent) op_fail(fmt::format("macro '{}' is called outside the scope that defined it", macro->text));
      if (call_depth_ >= options_.max_call_depth) {
        op_fail(fmt::format("macro '{}': calls nested deeper than {} (runaway recursion?)", macro->text,
                            options_.max_call_depth));
      }
      auto scope = child_of(parent);
      bind_params(macro->params, args, *scope, macro->text);
      std::string text;
      ++call_depth_;
      try {
        exec_body(macro->body, scope, text);
      } catch (...) {
        --call_depth_;
        throw;
      }
      --call_depth_;
      return Value::from_string(std::move(text));
    });
  }

  // ---- expressions ----

  Value lookup(const std::string& name, const ScopePtr& scope) const {
    for (const Scope* s = scope.get(); s; s = s->parent.get()) {
      const auto it = s->vars.find(name);
      if (it != s->vars.end()) return it->second;
    }
    return Value::undefined(fmt::format("'{}' is undefined", name));
  }

  CallArgs eval_args(const std::vector<ExprPtr>& positional,
                     const std::vector<std::pair<std::string, ExprPtr>>& keywords, const ScopePtr& scope) {
    CallArgs args;
    args.positional.reserve(positional.size());
    for (const auto& e : positional) args.positional.push_back(eval(*e, scope));
    for (const auto& [k, e] : keywords) args.keywords.emplace_back(k, eval(*e, scope));
    return args;
  }

  static Value call_value(const Value& callee, CallArgs& args) {
    if (callee.is_undefined()) op_fail(callee.text);
    if (callee.kind != Kind::Function) op_fail(fmt::format("'{}' object is not callable", callee.type_name()));
    return callee.function->call(args);
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return eval_inner(e, scope);
    } catch (const OpError& err) {
      throw TemplateError(e.line, err.message);
    } catch (const std::logic_error& err) {  // e.g. std::out_of_range from a number conversion
      throw TemplateError(e.line, err.what());
    } catch (const fmt::format_error& err) {
      throw TemplateError(e.line, err.what());
    }
  }

  static std::optional<int64_t> slice_bound(const Value& v) {
    if (v.is_none()) return std::nullopt;
    if (v.kind != Kind::Int && v.kind != Kind::Bool) op_fail("slice indices must be integers or None");
    return v.kind == Kind::Bool ? v.boolean : v.integer;
  }

  Value eval_inner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case ExprKind::Literal: return e.value;
      case ExprKind::Name: return lookup(e.name, scope);
      case ExprKind::List: {
        std::vector<Value> items;
        items.reserve(e.items.size());
        for (const auto& item : e.items) items.push_back(eval(*item, scope));
        return Value::new_list(std::move(items), e.is_tuple);
      }
      case ExprKind::Dict: {
        Value dict = Value::new_dict();
        for (size_t i = 0; i < e.keys.size(); ++i) dict.dict->set(eval(*e.keys[i], scope), eval(*e.items[i], scope));
        return dict;
      }
      case ExprKind::GetAttr: return get_attribute(eval(*e.object, scope), e.name);
      case ExprKind::GetItem: return get_item(eval(*e.object, scope), eval(*e.items[0], scope));
      case ExprKind::Slice: {
        const Value object = eval(*e.object, scope);
        std::optional<int64_t> bounds[3];
        for (size_t i = 0; i < 3; ++i)
          if (e.items[i]) bounds[i] = slice_bound(eval(*e.items[i], scope));
        return get_slice(object, bounds[0], bounds[1], bounds[2]);
      }
      case ExprKind::Call: {
        const Value callee = eval(*e.object, scope);
        CallArgs args = eval_args(e.items, e.kwargs, scope);
        return call_value(callee, args);
      }
      case ExprKind::Filter: {
        CallArgs args = eval_args(e.items, e.kwargs, scope);
        args.positional.insert(args.positional.begin(), eval(*e.object, scope));
        return apply_filter(e.name, args);
      }
      case ExprKind::Test: {
        CallArgs args = eval_args(e.items, e.kwargs, scope);
        args.positional.insert(args.positional.begin(), eval(*e.object, scope));
        return Value::from_bool(apply_test(e.name, args) != e.negated);
      }
      case ExprKind::Unary: {
        const Value v = eval(*e.object, scope);
        if (e.name == "not") return Value::from_bool(!v.truthy());
        return unary_op(e.name, v);
      }
      case ExprKind::Binary: {
        Value left = eval(*e.object, scope);
        if (e.name == "and") return left.truthy() ? eval(*e.right, scope) : left;
        if (e.name == "or") return left.truthy() ? left : eval(*e.right, scope);
        return binary_op(e.name, left, eval(*e.right, scope));
      }
      case ExprKind::Compare: {
        Value left = eval(*e.object, scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.items[i], scope);
          if (!compare_op(e.ops[i], left, right)) return Value::from_bool(false);
          left = std::move(right);
        }
        return Value::from_bool(true);
      }
      case ExprKind::Conditional: {
        if (eval(*e.items[1], scope).truthy()) return eval(*e.items[0], scope);
        if (e.items[2]) return eval(*e.items[2], scope);
        return Value::undefined(fmt::format(
            "the inline if-expression on line {} evaluated to false and no else section was defined.", e.line));
      }
    }
    return Value::undefined("unknown expression");
  }

  static bool compare_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in") return contains(b, a);
    if (op == "notin") return !contains(b, a);
    if (a.is_undefined()) op_fail(a.text);
    if (b.is_undefined()) op_fail(b.text);
    const int c = compare(a, b);
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  const RenderOptions& options_;
  int call_depth_ = 0;
};

}  // namespace

std::string render_body(const Body& body, const Value& context, const RenderOptions& options) {
  return Interpreter(options).render(body, context);
}

}  // namespace specula::jinja
