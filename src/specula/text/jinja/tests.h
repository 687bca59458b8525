#pragma once
// Jinja's built-in tests (`value is name(args)`), with the semantics of Jinja2 3.1.
#include <string_view>

#include "specula/text/jinja/value.h"

namespace specula::jinja {

bool has_test(std::string_view name);

// `args.positional[0]` is the tested value. Throws OpError.
bool apply_test(std::string_view name, const CallArgs& args);

}  // namespace specula::jinja
