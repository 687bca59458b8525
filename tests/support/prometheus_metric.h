#pragma once
// The value of one sample in a Prometheus text exposition (the server's /metrics body).
#include <string>

namespace specula::test {

// The value on the line "<name> <value>", or -1 when there is none.
inline double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

}  // namespace specula::test
