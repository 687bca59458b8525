#pragma once
// specula's one exception type. Every message names what failed (file, tensor, key, limit) so a
// user can act on it without a debugger; the CLI prints it as one line and exits 1.
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace specula {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace specula
