#include "specula/server/cors.h"

#include <algorithm>

namespace specula::server {

std::string allowed_origin(const std::vector<std::string>& allowed, const std::string& origin) {
  if (origin.empty()) return {};
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return "*";
  if (std::find(allowed.begin(), allowed.end(), origin) != allowed.end()) return origin;
  return {};
}

}  // namespace specula::server
