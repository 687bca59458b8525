#include "cli/token_list.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include <CLI/CLI.hpp>

namespace specula::cli {

std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    const size_t a = item.find_first_not_of(" \t");
    const size_t b = item.find_last_not_of(" \t");
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    if (item.empty()) throw CLI::ValidationError("--tokens", "empty entry in token list '" + text + "'");
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE || v < 0 || v > std::numeric_limits<int32_t>::max())
      throw CLI::ValidationError("--tokens", "'" + item + "' is not a token id (a non-negative integer)");
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  return ids;
}

}  // namespace specula::cli
