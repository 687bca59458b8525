#include "specula/speculative/gamma_choice.h"

#include <charconv>

#include "specula/util/error.h"

namespace specula {

GammaChoice parse_gamma_choice(const std::string& text) {
  GammaChoice g;
  if (text == "auto") {
    g.automatic = true;
    return g;
  }
  int64_t v = -1;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0)
    fail("gamma '{}' is neither 'auto' nor a non-negative integer", text);
  g.fixed = v;
  return g;
}

}  // namespace specula
