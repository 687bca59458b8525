#pragma once
// Jinja's built-in filters (`value | name(args)`), with the semantics of Jinja2 3.1 and the
// `tojson` of Hugging Face's chat-template environment.
#include <string_view>

#include "specula/text/jinja/value.h"

namespace specula::jinja {

bool has_filter(std::string_view name);

// `args.positional[0]` is the filtered value. Throws OpError.
Value apply_filter(std::string_view name, CallArgs& args);

}  // namespace specula::jinja
