#include "specula/engine/option_limits.h"

#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "specula/util/error.h"

namespace specula::limits {

std::string describe(const IntRange& range) { return fmt::format("[{}, {}]", range.lo, range.hi); }

std::string describe(const RealRange& range) {
  return fmt::format("{}{}, {}]", range.lo_open ? "(" : "[", range.lo, range.hi);
}

bool contains(const IntRange& range, int64_t value) { return value >= range.lo && value <= range.hi; }

bool contains(const RealRange& range, double value) {
  // Written as the allowed condition so that NaN fails it.
  const bool above_lo = range.lo_open ? value > range.lo : value >= range.lo;
  return std::isfinite(value) && above_lo && value <= range.hi;
}

void require_in(std::string_view what, int64_t value, const IntRange& range) {
  if (!contains(range, value)) fail("{} {} is not in {}", what, value, describe(range));
}

namespace {

// `text` read whole as a T (from_chars: no sign prefix, no spaces), then checked against `range`.
template <class T, class Range>
std::string text_error(std::string_view text, const Range& range, const char* kind) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) return fmt::format("{} is not in {}", text, describe(range));
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return fmt::format("'{}' is not {} (allowed: {})", text, kind, describe(range));
  if (!contains(range, value)) return fmt::format("{} is not in {}", text, describe(range));
  return {};
}

}  // namespace

std::string int_text_error(std::string_view text, const IntRange& range) {
  return text_error<int64_t>(text, range, "an integer");
}

std::string real_text_error(std::string_view text, const RealRange& range) {
  return text_error<double>(text, range, "a number");
}

std::string gamma_text_error(std::string_view text) {
  if (text == "auto") return {};
  if (int_text_error(text, kGamma).empty()) return {};
  return fmt::format("'{}' is neither 'auto' nor a draft length in {}", text, describe(kGamma));
}

}  // namespace specula::limits
