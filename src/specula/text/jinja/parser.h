#pragma once
// Builds the syntax tree from lexer tokens with Jinja2's grammar and operator precedence.
// Unknown filters and tests are reported at parse time, as Jinja2 does when it compiles (except
// inside `if` blocks and conditional expressions, where Jinja2 waits until they are applied).
#include <string_view>

#include "specula/text/jinja/ast.h"
#include "specula/text/jinja/lexer.h"

namespace specula::jinja {

// Throws TemplateError naming the line of the first syntax error.
Body parse_template(std::string_view source, const LexerOptions& options);

}  // namespace specula::jinja
