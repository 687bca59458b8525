#include "specula/text/jinja/operators.h"

#include <cmath>

#include <fmt/format.h>

#include "specula/text/jinja/errors.h"

namespace specula::jinja {
namespace {

bool is_integral(const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Bool; }
int64_t as_int(const Value& v) { return v.kind == Kind::Bool ? v.boolean : v.integer; }

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  op_fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

constexpr size_t kMaxRepeatItems = size_t{1} << 28;  // 256 Mi characters or items

Value repeat(const Value& sequence, int64_t times) {
  if (sequence.is_string()) {
    std::string out;
    if (times > 0 && sequence.text.size() * static_cast<size_t>(times) > kMaxRepeatItems)
      op_fail("string repetition is too large");
    for (int64_t i = 0; i < times; ++i) out += sequence.text;
    return Value::from_string(out);
  }
  std::vector<Value> out;
  if (times > 0 && sequence.list->items.size() * static_cast<size_t>(times) > kMaxRepeatItems)
    op_fail("sequence repetition is too large");
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), sequence.list->items.begin(), sequence.list->items.end());
  return Value::new_list(std::move(out), sequence.list->tuple);
}

// Python ints are unbounded; specula's are 64-bit and refuse to wrap silently.
int64_t checked(bool overflowed, int64_t result, std::string_view op) {
  if (overflowed) op_fail(fmt::format("integer result of '{}' does not fit in 64 bits", op));
  return result;
}

int64_t add_int(int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflowed = __builtin_add_overflow(a, b, &r);
  return checked(overflowed, r, "+");
}
int64_t sub_int(int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflowed = __builtin_sub_overflow(a, b, &r);
  return checked(overflowed, r, "-");
}
int64_t mul_int(int64_t a, int64_t b, std::string_view op) {
  int64_t r = 0;
  const bool overflowed = __builtin_mul_overflow(a, b, &r);
  return checked(overflowed, r, op);
}

int64_t floor_div(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) op_fail("integer result of '//' does not fit in 64 bits");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value::from_string(a.str() + b.str());
  if (a.is_undefined()) op_fail(a.text);
  if (b.is_undefined()) op_fail(b.text);
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = is_integral(a) && is_integral(b);
  if (op == "+") {
    if (ints) return Value::from_int(add_int(as_int(a), as_int(b)));
    if (numbers) return Value::from_float(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value::from_string(a.text + b.text);
    if (a.is_list() && b.is_list() && a.list->tuple == b.list->tuple) {
      std::vector<Value> out = a.list->items;
      out.insert(out.end(), b.list->items.begin(), b.list->items.end());
      return Value::new_list(std::move(out), a.list->tuple);
    }
    if (a.is_string()) op_fail(fmt::format("can only concatenate str (not \"{}\") to str", b.type_name()));
    if (a.is_list())
      op_fail(fmt::format("can only concatenate {} (not \"{}\") to {}", a.type_name(), b.type_name(), a.type_name()));
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value::from_int(sub_int(as_int(a), as_int(b)));
    if (numbers) return Value::from_float(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::from_int(mul_int(as_int(a), as_int(b), "*"));
    if (numbers) return Value::from_float(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(a, as_int(b));
    if ((b.is_string() || b.is_list()) && is_integral(a)) return repeat(b, as_int(a));
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported("/", a, b);
    if (b.as_double() == 0.0) op_fail("division by zero");
    return Value::from_float(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!numbers) unsupported("//", a, b);
    if (b.as_double() == 0.0) op_fail("integer division or modulo by zero");
    if (ints) return Value::from_int(floor_div(as_int(a), as_int(b)));
    return Value::from_float(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return Value::from_string(percent_format(a.text, b));
    if (!numbers) unsupported("%", a, b);
    if (b.as_double() == 0.0) op_fail("integer division or modulo by zero");
    if (ints) {
      const int64_t x = as_int(a), y = as_int(b);
      if (y == -1) return Value::from_int(0);
      return Value::from_int(x - floor_div(x, y) * y);
    }
    const double x = a.as_double(), y = b.as_double();
    double r = std::fmod(x, y);
    if (r != 0.0 && ((r < 0) != (y < 0))) r += y;
    return Value::from_float(r);
  }
  if (op == "**") {
    if (!numbers) unsupported("** or pow()", a, b);
    if (ints && as_int(b) >= 0) {
      int64_t result = 1, base = as_int(a);
      for (int64_t e = as_int(b); e > 0; e >>= 1) {
        if (e & 1) result = mul_int(result, base, "**");
        if (e > 1) base = mul_int(base, base, "**");
      }
      return Value::from_int(result);
    }
    return Value::from_float(std::pow(a.as_double(), b.as_double()));
  }
  op_fail(fmt::format("unknown operator '{}'", op));
}

Value unary_op(std::string_view op, const Value& v) {
  if (v.is_undefined()) op_fail(v.text);
  if (!v.is_number()) op_fail(fmt::format("bad operand type for unary {}: '{}'", op, v.type_name()));
  if (v.kind == Kind::Float) return Value::from_float(op == "-" ? -v.real : v.real);
  return Value::from_int(op == "-" ? sub_int(0, as_int(v)) : as_int(v));
}

bool contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind) {
    case Kind::String:
      if (!needle.is_string())
        op_fail(fmt::format("'in <string>' requires string as left operand, not {}", needle.type_name()));
      return haystack.text.find(needle.text) != std::string::npos;
    case Kind::List:
      for (const auto& item : haystack.list->items)
        if (equals(item, needle)) return true;
      return false;
    case Kind::Dict: return haystack.dict->find(needle) != nullptr;
    case Kind::Undefined: return false;
    default: op_fail(fmt::format("argument of type '{}' is not iterable", haystack.type_name()));
  }
}

static std::string percent_format_impl(const std::string& format, const Value& args);

std::string percent_format(const std::string& format, const Value& args) {
  try {
    return percent_format_impl(format, args);
  } catch (const fmt::format_error& e) {
    op_fail(fmt::format("bad format '{}': {}", format, e.what()));
  }
}

static std::string percent_format_impl(const std::string& format, const Value& args) {
  std::vector<Value> values;
  const Value* mapping = nullptr;
  if (args.is_list() && args.list->tuple) {
    values = args.list->items;
  } else {
    values.push_back(args);
    if (args.is_dict()) mapping = &args;
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) op_fail("incomplete format");
    const Value* value = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos || !mapping) op_fail("format requires a mapping");
      value = mapping->dict->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (!value) op_fail(fmt::format("key '{}' is missing for the format", format.substr(i + 1, close - i - 1)));
      i = close + 1;
    }
    std::string spec;
    while (i < format.size() && std::string_view("-+ #0123456789.").find(format[i]) != std::string_view::npos)
      spec.push_back(format[i++]);
    if (i >= format.size()) op_fail("incomplete format");
    const char conv = format[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (!value) {
      if (next >= values.size()) op_fail("not enough arguments for format string");
      value = &values[next++];
    }
    switch (conv) {
      case 's': {
        const std::string text = value->str();
        const bool left = spec.find('-') != std::string::npos;
        const std::string digits =
            spec.substr(spec.find_first_not_of('-') == std::string::npos ? spec.size() : spec.find_first_not_of('-'));
        const size_t width = digits.empty() || digits.find('.') != std::string::npos ? 0 : std::stoul(digits);
        const size_t len = text.size();
        const std::string pad = width > len ? std::string(width - len, ' ') : std::string();
        out += left ? text + pad : pad + text;
        break;
      }
      case 'r': out += value->repr(); break;
      case 'd':
      case 'i':
        if (!value->is_number())
          op_fail(fmt::format("%d format: a real number is required, not {}", value->type_name()));
        out += fmt::format(fmt::runtime("{:" + spec + "d}"), static_cast<int64_t>(value->as_double()));
        break;
      case 'f':
      case 'e':
      case 'g':
        if (!value->is_number()) op_fail(fmt::format("must be real number, not {}", value->type_name()));
        out +=
            fmt::format(fmt::runtime("{:" + (spec.find('.') == std::string::npos && conv != 'g' ? spec + ".6" : spec) +
                                     std::string(1, conv) + "}"),
                        value->as_double());
        break;
      case 'x': out += fmt::format(fmt::runtime("{:" + spec + "x}"), static_cast<int64_t>(value->as_double())); break;
      default: op_fail(fmt::format("unsupported format character '{}'", conv));
    }
  }
  if (!mapping && next < values.size()) op_fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace specula::jinja
