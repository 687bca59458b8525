#pragma once
// The Python methods templates call on strings, dicts and lists (`text.split(',')`,
// `message.get('content')`, `items.append(x)`), returned bound to their object.
#include <optional>
#include <string>

#include "specula/text/jinja/value.h"

namespace specula::jinja {

// The bound method `object.name`, or nullopt when `object` has no such method.
std::optional<Value> bound_method(const Value& object, const std::string& name);

}  // namespace specula::jinja
