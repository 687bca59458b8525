#pragma once
// Names from untrusted files in error messages: one readable line, bounded in length.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specula {

// At most 200 characters, control characters as '?', "..." when cut.
std::string printable_name(std::string_view name);
// "[a, b, c]".
std::string dims_string(const std::vector<int64_t>& dims);

}  // namespace specula
