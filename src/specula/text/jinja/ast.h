#pragma once
// The syntax tree of a parsed template. Every node keeps its template line for error messages.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "specula/text/jinja/value.h"

namespace specula::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  Literal,      // value
  Name,         // name
  List,         // items (tuple: is_tuple)
  Dict,         // keys[i]: items[i]
  GetAttr,      // object.name
  GetItem,      // object[index]
  Slice,        // object[start:stop:step] (items: start, stop, step; null when omitted)
  Call,         // object(args, kwargs)
  Filter,       // object | name(args, kwargs)
  Test,         // object is [not] name(args)
  Unary,        // op: "not", "-", "+"
  Binary,       // op: + - * / // % ** ~ and or
  Compare,      // object, then ops[i] items[i]: == != < <= > >= in notin
  Conditional,  // items: then, condition, else (else may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;                 // Literal
  std::string name;            // Name, GetAttr, Filter, Test, Unary/Binary op
  ExprPtr object;              // operand of postfix forms, filters, tests, unary; left of Binary/Compare
  ExprPtr right;               // right of Binary
  std::vector<ExprPtr> items;  // List/Tuple items, Dict values, Call/Filter/Test args, Slice parts
  std::vector<ExprPtr> keys;   // Dict keys
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare operators
  bool is_tuple = false;
  bool negated = false;  // Test: `is not`

  Expr(ExprKind k, int l) : kind(k), line(l) {}
};

enum class StmtKind {
  Text,
  Output,
  If,
  For,
  Set,
  SetBlock,
  Macro,
  CallBlock,
  FilterBlock,
  Break,
  Continue,
  With,
  Scope
};

// One `name(args)` of a filter chain in `{% filter %}` or `{% set x | f %}`.
struct FilterCall {
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  int line = 0;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                                          // Text; Macro name
  ExprPtr expr;                                              // Output, Set value, For iterable, CallBlock call
  std::vector<std::pair<ExprPtr, Body>> branches;            // If: (condition, body) in order
  Body body;                                                 // For/SetBlock/Macro/CallBlock/FilterBlock/With/Scope body
  Body else_body;                                            // If/For else
  std::vector<std::string> targets;                          // For/Set names (several: tuple unpacking)
  std::string attribute;                                     // Set: `ns.attribute = ...` (targets[0] is ns)
  ExprPtr filter_condition;                                  // For: `for x in y if cond`
  bool recursive = false;                                    // For: `recursive` (loop(...) calls)
  std::vector<FilterCall> filters;                           // FilterBlock / SetBlock filters
  std::vector<MacroParam> params;                            // Macro / CallBlock caller params
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // With

  Stmt(StmtKind k, int l) : kind(k), line(l) {}
};

}  // namespace specula::jinja
