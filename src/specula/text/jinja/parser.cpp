#include "specula/text/jinja/parser.h"

#include <initializer_list>

#include <fmt/format.h>

#include "specula/text/jinja/errors.h"
#include "specula/text/jinja/filters.h"
#include "specula/text/jinja/tests.h"

namespace specula::jinja {
namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::Text: return "template data";
    case TokenType::VariableBegin: return "begin of print statement";
    case TokenType::VariableEnd: return "end of print statement";
    case TokenType::BlockBegin: return "begin of statement block";
    case TokenType::BlockEnd: return "end of statement block";
    case TokenType::End: return "end of template";
    case TokenType::String: return "string";
    case TokenType::Integer:
    case TokenType::Float: return "number";
    default: return "'" + t.value + "'";
  }
}

// Deepest nesting of expressions or blocks accepted; deeper input is refused rather than
// exhausting the stack of this recursive-descent parser (and of the interpreter after it).
constexpr int kMaxNesting = 256;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_all() {
    Body body = subparse({});
    if (current().type != TokenType::End) {
      throw TemplateError(current().line, fmt::format("unexpected tag '{}'", current().value));
    }
    return body;
  }

 private:
  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const { return current().type == TokenType::Operator && current().value == op; }
  bool is_name(std::string_view name) const { return current().type == TokenType::Name && current().value == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  [[noreturn]] void unexpected(std::string_view expected) const {
    throw TemplateError(current().line, fmt::format("expected {}, got {}", expected, describe(current())));
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) unexpected(fmt::format("'{}'", op));
  }
  void expect_block_end() {
    if (current().type != TokenType::BlockEnd) unexpected("end of statement block");
    advance();
  }
  std::string expect_name() {
    if (current().type != TokenType::Name) unexpected("a name");
    std::string name = current().value;
    advance();
    return name;
  }

  static std::string_view closing_tag(std::initializer_list<std::string_view> ends) {
    for (auto e : ends)
      if (e.rfind("end", 0) == 0) return e;
    return *ends.begin();
  }

  // Parses template data, prints and statements until a block tag whose name is in `ends`; the
  // position is left on that name. At the end of the template with `ends` non-empty, fails.
  Body subparse(std::initializer_list<std::string_view> ends, std::string_view opener = {}, int opener_line = 0) {
    Body body;
    while (true) {
      const Token& t = current();
      if (t.type == TokenType::End) {
        if (ends.size() == 0) return body;
        throw TemplateError(
            t.line, fmt::format("unexpected end of template: '{}' opened at line {} is not closed (expected '{}')",
                                opener, opener_line, closing_tag(ends)));
      }
      if (t.type == TokenType::Text) {
        auto s = std::make_unique<Stmt>(StmtKind::Text, t.line);
        s->text = t.value;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == TokenType::VariableBegin) {
        auto s = std::make_unique<Stmt>(StmtKind::Output, t.line);
        advance();
        s->expr = parse_tuple(true);
        if (current().type != TokenType::VariableEnd) unexpected("end of print statement");
        advance();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::BlockBegin) {
        advance();
        if (current().type != TokenType::Name) unexpected("a statement name");
        for (auto e : ends)
          if (current().value == e) return body;
        const std::string& name = current().value;
        if (name.rfind("end", 0) == 0 || name == "elif" || name == "else") {
          if (ends.size() == 0)
            throw TemplateError(current().line, fmt::format("unexpected '{}' outside any block", name));
          throw TemplateError(current().line,
                              fmt::format("unexpected '{}': the innermost open block is '{}' (line {}), expecting '{}'",
                                          name, opener, opener_line, closing_tag(ends)));
        }
        body.push_back(parse_statement());
      } else {
        throw TemplateError(t.line, fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  // Consumes the end tag name the subparse stopped on, and the `%}`.
  void end_tag() {
    advance();
    expect_block_end();
  }

  StmtPtr parse_statement() {
    NestingGuard guard(*this);
    const Token& t = current();
    const std::string name = t.value;
    const int line = t.line;
    advance();
    if (name == "if") return parse_if(line);
    if (name == "for") return parse_for(line);
    if (name == "set") return parse_set(line);
    if (name == "macro") return parse_macro(line);
    if (name == "call") return parse_call_block(line);
    if (name == "filter") return parse_filter_block(line);
    if (name == "with") return parse_with(line);
    if (name == "break" || name == "continue") {
      auto s = std::make_unique<Stmt>(name == "break" ? StmtKind::Break : StmtKind::Continue, line);
      expect_block_end();
      return s;
    }
    if (name == "generation") {
      // Hugging Face's AssistantTracker tag: renders its body unchanged.
      auto s = std::make_unique<Stmt>(StmtKind::Scope, line);
      expect_block_end();
      s->body = subparse({"endgeneration"}, "generation", line);
      end_tag();
      return s;
    }
    throw TemplateError(line, fmt::format("unknown tag '{}'", name));
  }

  StmtPtr parse_if(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::If, line);
    while (true) {
      ExprPtr cond = parse_tuple(false);
      expect_block_end();
      Body body = subparse({"elif", "else", "endif"}, "if", line);
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (is_name("elif")) {
        advance();
        continue;
      }
      if (is_name("else")) {
        advance();
        expect_block_end();
        s->else_body = subparse({"endif"}, "if", line);
      }
      end_tag();
      return s;
    }
  }

  std::vector<std::string> parse_assign_names() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::For, line);
    s->targets = parse_assign_names();
    if (!skip_name("in")) unexpected("'in'");
    s->expr = parse_tuple(false);
    if (skip_name("if")) s->filter_condition = parse_expression(true);
    if (skip_name("recursive")) s->recursive = true;
    expect_block_end();
    s->body = subparse({"endfor", "else"}, "for", line);
    if (is_name("else")) {
      advance();
      expect_block_end();
      s->else_body = subparse({"endfor"}, "for", line);
    }
    end_tag();
    return s;
  }

  StmtPtr parse_set(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::Set, line);
    std::string first = expect_name();
    if (skip_op(".")) {
      s->targets.push_back(first);
      s->attribute = expect_name();
    } else {
      s->targets.push_back(first);
      while (skip_op(",")) s->targets.push_back(expect_name());
    }
    if (skip_op("=")) {
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    if (!s->attribute.empty() || s->targets.size() != 1) unexpected("'='");
    s->kind = StmtKind::SetBlock;
    while (skip_op("|")) s->filters.push_back(parse_filter_call());
    expect_block_end();
    s->body = subparse({"endset"}, "set", line);
    end_tag();
    return s;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  StmtPtr parse_macro(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::Macro, line);
    s->text = expect_name();
    s->params = parse_params();
    expect_block_end();
    s->body = subparse({"endmacro"}, "macro", line);
    end_tag();
    return s;
  }

  StmtPtr parse_call_block(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::CallBlock, line);
    if (is_op("(")) s->params = parse_params();
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::Call) throw TemplateError(line, "expected a call in the call block");
    expect_block_end();
    s->body = subparse({"endcall"}, "call", line);
    end_tag();
    return s;
  }

  FilterCall parse_filter_call() {
    FilterCall f;
    f.line = current().line;
    f.name = expect_name();
    while (skip_op(".")) f.name += "." + expect_name();
    if (is_op("(")) parse_call_args(f.args, f.kwargs);
    return f;
  }

  StmtPtr parse_filter_block(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::FilterBlock, line);
    do {
      s->filters.push_back(parse_filter_call());
    } while (skip_op("|"));
    expect_block_end();
    s->body = subparse({"endfilter"}, "filter", line);
    end_tag();
    return s;
  }

  StmtPtr parse_with(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::With, line);
    while (current().type != TokenType::BlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->assignments.emplace_back(std::move(name), parse_expression(true));
    }
    expect_block_end();
    s->body = subparse({"endwith"}, "with", line);
    end_tag();
    return s;
  }

  // ---- expressions ----

  bool at_tuple_end() const {
    const Token& t = current();
    return t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd || t.type == TokenType::End ||
           (t.type == TokenType::Operator && t.value == ")");
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens = false) {
    const int line = current().line;
    std::vector<ExprPtr> items;
    bool saw_comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        saw_comma = true;
      }
      if (at_tuple_end()) break;
      items.push_back(parse_expression(with_condexpr));
    }
    if (!saw_comma) {
      if (items.size() == 1) return std::move(items[0]);
      if (!explicit_parens) unexpected("an expression");
    }
    auto e = std::make_unique<Expr>(ExprKind::List, line);
    e->items = std::move(items);
    e->is_tuple = true;
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    NestingGuard guard(*this);
    if (!with_condexpr) return parse_or();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const int line = current().line;
      advance();
      ExprPtr cond = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) otherwise = parse_expression(true);
      auto e = std::make_unique<Expr>(ExprKind::Conditional, line);
      e->items.push_back(std::move(expr));
      e->items.push_back(std::move(cond));
      e->items.push_back(std::move(otherwise));
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto e = std::make_unique<Expr>(ExprKind::Binary, line);
    e->name = std::move(op);
    e->object = std::move(left);
    e->right = std::move(right);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = current().line;
      advance();
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = current().line;
      advance();
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    NestingGuard guard(*this);
    if (is_name("not")) {
      auto e = std::make_unique<Expr>(ExprKind::Unary, current().line);
      advance();
      e->name = "not";
      e->object = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = current().line;
    ExprPtr left = parse_math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (current().type == TokenType::Operator &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        op = current().value;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().type == TokenType::Name && peek().value == "in") {
        op = "notin";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = std::make_unique<Expr>(ExprKind::Compare, line);
        cmp->object = std::move(left);
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(left);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = current().value;
      const int line = current().line;
      advance();
      left = binary(op, std::move(left), parse_concat(), line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const int line = current().line;
      advance();
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = current().value;
      const int line = current().line;
      advance();
      left = binary(op, std::move(left), parse_pow(), line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int line = current().line;
      advance();
      left = binary("**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    NestingGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      auto e = std::make_unique<Expr>(ExprKind::Unary, current().line);
      e->name = current().value;
      advance();
      e->object = parse_unary(false);
      node = std::move(e);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = current();
    const int line = t.line;
    if (t.type == TokenType::Name) {
      auto e = std::make_unique<Expr>(ExprKind::Literal, line);
      if (t.value == "true" || t.value == "True") {
        e->value = Value::from_bool(true);
      } else if (t.value == "false" || t.value == "False") {
        e->value = Value::from_bool(false);
      } else if (t.value == "none" || t.value == "None") {
        e->value = Value::none();
      } else {
        e->kind = ExprKind::Name;
        e->name = t.value;
      }
      advance();
      return e;
    }
    if (t.type == TokenType::String) {
      std::string s;
      while (current().type == TokenType::String) {
        s += current().value;
        advance();
      }
      auto e = std::make_unique<Expr>(ExprKind::Literal, line);
      e->value = Value::from_string(std::move(s));
      return e;
    }
    if (t.type == TokenType::Integer || t.type == TokenType::Float) {
      auto e = std::make_unique<Expr>(ExprKind::Literal, line);
      e->value = t.type == TokenType::Integer ? Value::from_int(t.integer) : Value::from_float(t.real);
      advance();
      return e;
    }
    if (skip_op("(")) {
      ExprPtr inner = parse_tuple(true, true);
      expect_op(")");
      return inner;
    }
    if (skip_op("[")) {
      auto e = std::make_unique<Expr>(ExprKind::List, line);
      while (!is_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("]")) break;
        e->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (skip_op("{")) {
      auto e = std::make_unique<Expr>(ExprKind::Dict, line);
      while (!is_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("}")) break;
        e->keys.push_back(parse_expression(true));
        expect_op(":");
        e->items.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    unexpected("an expression");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const int line = current().line;
      if (is_op(".")) {
        advance();
        auto e = std::make_unique<Expr>(ExprKind::GetAttr, line);
        if (current().type == TokenType::Integer) {
          e->kind = ExprKind::GetItem;
          auto index = std::make_unique<Expr>(ExprKind::Literal, line);
          index->value = Value::from_int(current().integer);
          advance();
          e->items.push_back(std::move(index));
        } else {
          e->name = expect_name();
        }
        e->object = std::move(node);
        node = std::move(e);
      } else if (is_op("[")) {
        advance();
        node = parse_subscript(std::move(node), line);
      } else if (is_op("(")) {
        node = parse_call(std::move(node), line);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object, int line) {
    std::vector<ExprPtr> parts;
    bool is_slice = false;
    auto part = [&]() -> ExprPtr {
      if (is_op(":") || is_op("]")) return nullptr;
      return parse_expression(true);
    };
    parts.push_back(part());
    if (skip_op(":")) {
      is_slice = true;
      parts.push_back(part());
      if (skip_op(":")) {
        parts.push_back(part());
      } else {
        parts.push_back(nullptr);
      }
    }
    expect_op("]");
    if (!is_slice && !parts[0]) unexpected("an expression");
    auto e = std::make_unique<Expr>(is_slice ? ExprKind::Slice : ExprKind::GetItem, line);
    e->object = std::move(object);
    e->items = std::move(parts);
    return e;
  }

  void parse_call_args(std::vector<ExprPtr>& args, std::vector<std::pair<std::string, ExprPtr>>& kwargs) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (current().type == TokenType::Name && peek().type == TokenType::Operator && peek().value == "=") {
        std::string name = current().value;
        advance();
        advance();
        kwargs.emplace_back(std::move(name), parse_expression(true));
      } else {
        if (!kwargs.empty()) throw TemplateError(current().line, "positional argument follows keyword argument");
        args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee, int line) {
    auto e = std::make_unique<Expr>(ExprKind::Call, line);
    e->object = std::move(callee);
    parse_call_args(e->items, e->kwargs);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      const int line = current().line;
      if (is_op("|")) {
        advance();
        FilterCall f = parse_filter_call();
        auto e = std::make_unique<Expr>(ExprKind::Filter, line);
        e->name = std::move(f.name);
        e->object = std::move(node);
        e->items = std::move(f.args);
        e->kwargs = std::move(f.kwargs);
        node = std::move(e);
      } else if (is_name("is")) {
        advance();
        node = parse_test(std::move(node), line);
      } else if (is_op("(")) {
        node = parse_call(std::move(node), line);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_test(ExprPtr node, int line) {
    auto e = std::make_unique<Expr>(ExprKind::Test, line);
    e->negated = skip_name("not");
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    e->object = std::move(node);
    const Token& t = current();
    if (is_name("is")) throw TemplateError(t.line, "You cannot chain multiple tests with is");
    if (is_op("(")) {
      parse_call_args(e->items, e->kwargs);
    } else if ((t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Integer ||
                t.type == TokenType::Float || is_op("[") || is_op("{")) &&
               !(t.type == TokenType::Name &&
                 (t.value == "else" || t.value == "or" || t.value == "and" || t.value == "if" || t.value == "is" ||
                  t.value == "in" || t.value == "not"))) {
      // One argument without parentheses: `x is divisibleby 3`, `x is sameas false`.
      e->items.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  // Counts one level of nesting for the lifetime of the guard.
  struct NestingGuard {
    NestingGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) {
        throw TemplateError(parser.current().line, fmt::format("template nests deeper than {} levels", kMaxNesting));
      }
    }
    ~NestingGuard() { --parser.depth_; }
    Parser& parser;
  };

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// Jinja2 reports an unknown filter or test when it compiles the template, except inside an `if`
// (condition and branches) or a conditional expression, where the error waits until the filter is
// applied, so templates can guard optional filters. Loops, macros and blocks start over.
class UnknownNameCheck {
 public:
  void body(const Body& b, bool soft) {
    for (const auto& s : b) stmt(*s, soft);
  }

 private:
  void filters(const std::vector<FilterCall>& calls) {
    for (const auto& f : calls) {
      if (!has_filter(f.name)) throw TemplateError(f.line, fmt::format("unknown filter '{}'", f.name));
      for (const auto& a : f.args) expr(a.get(), false);
      for (const auto& kw : f.kwargs) expr(kw.second.get(), false);
    }
  }

  void stmt(const Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::If:
        for (const auto& [cond, branch] : s.branches) {
          expr(cond.get(), true);
          body(branch, true);
        }
        body(s.else_body, true);
        return;
      case StmtKind::For:
        expr(s.expr.get(), soft);
        expr(s.filter_condition.get(), false);
        body(s.body, false);
        body(s.else_body, false);
        return;
      case StmtKind::SetBlock:
      case StmtKind::FilterBlock:
        filters(s.filters);
        body(s.body, false);
        return;
      case StmtKind::Macro:
      case StmtKind::CallBlock:
        for (const auto& p : s.params) expr(p.default_value.get(), false);
        expr(s.expr.get(), soft);
        body(s.body, false);
        return;
      case StmtKind::With:
        for (const auto& a : s.assignments) expr(a.second.get(), soft);
        body(s.body, false);
        return;
      case StmtKind::Scope: body(s.body, false); return;
      default: expr(s.expr.get(), soft); return;
    }
  }

  void expr(const Expr* e, bool soft) {
    if (!e) return;
    if (e->kind == ExprKind::Filter && !soft && !has_filter(e->name)) {
      throw TemplateError(e->line, fmt::format("unknown filter '{}'", e->name));
    }
    if (e->kind == ExprKind::Test && !soft && !has_test(e->name)) {
      throw TemplateError(e->line, fmt::format("unknown test '{}'", e->name));
    }
    const bool inner_soft = soft || e->kind == ExprKind::Conditional;
    expr(e->object.get(), inner_soft);
    expr(e->right.get(), inner_soft);
    for (const auto& i : e->items) expr(i.get(), inner_soft);
    for (const auto& k : e->keys) expr(k.get(), inner_soft);
    for (const auto& kw : e->kwargs) expr(kw.second.get(), inner_soft);
  }
};

}  // namespace

Body parse_template(std::string_view source, const LexerOptions& options) {
  Body body = Parser(tokenize(source, options)).parse_all();
  UnknownNameCheck().body(body, false);
  return body;
}

}  // namespace specula::jinja
