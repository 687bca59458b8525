#pragma once
// Executes a parsed template against a context of variables and returns the rendered text.
#include <ctime>
#include <functional>
#include <string>

#include "specula/text/jinja/ast.h"
#include "specula/text/jinja/value.h"

namespace specula::jinja {

struct RenderOptions {
  // The current local time for strftime_now(format); tests inject a fixed clock.
  std::function<std::tm()> now;
  // Deepest macro nesting allowed (a recursive macro without a base case fails instead of
  // exhausting the stack).
  int max_call_depth = 200;
};

// `context` is a dict of variables. Throws TemplateError (with the line) for runtime errors and
// RaisedError for raise_exception(msg).
std::string render_body(const Body& body, const Value& context, const RenderOptions& options);

}  // namespace specula::jinja
