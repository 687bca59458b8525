#pragma once
// Python's arithmetic, concatenation and membership operators as Jinja evaluates them.
#include <string_view>

#include "specula/text/jinja/value.h"

namespace specula::jinja {

// op: + - * / // % ** ~. Throws OpError (Python's TypeError/ZeroDivisionError messages, or the
// message of an Undefined operand).
Value binary_op(std::string_view op, const Value& left, const Value& right);
// op: - +
Value unary_op(std::string_view op, const Value& operand);
// `needle in haystack`
bool contains(const Value& haystack, const Value& needle);
// Python's printf-style `format % args` (args: one value or a tuple).
std::string percent_format(const std::string& format, const Value& args);

}  // namespace specula::jinja
