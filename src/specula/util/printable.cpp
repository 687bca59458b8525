#include "specula/util/printable.h"

namespace specula {

std::string printable_name(std::string_view name) {
  constexpr size_t kMax = 200;
  std::string out;
  for (char c : name.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (name.size() > kMax) out += "...";
  return out;
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

}  // namespace specula
