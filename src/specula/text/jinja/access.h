#pragma once
// Attribute, item and slice access, iteration and length with Jinja2's sandboxed semantics:
// `obj.name` is a method or attribute first and an item second (`obj[key]` the other way round),
// a missing attribute or item is an Undefined carrying Jinja's message, and names starting with
// '_' are never attributes.
#include <optional>
#include <string>
#include <vector>

#include "specula/text/jinja/value.h"

namespace specula::jinja {

Value get_attribute(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& key);
Value get_slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
                std::optional<int64_t> step);

// The items a `for` loop visits: list items, dict keys, string characters, nothing for Undefined.
// Throws OpError for values that are not iterable.
std::vector<Value> iterate(const Value& value);

// len(value); Undefined has length 0. Throws OpError for values without a length.
int64_t length_of(const Value& value);

}  // namespace specula::jinja
