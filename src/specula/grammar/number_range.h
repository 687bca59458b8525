#pragma once
// GBNF for the numbers JSON Schema bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum)
// allow, exact in decimal: integers in [lo, hi], and numbers written as an integer part of at most
// kMaxIntegerDigits digits with an optional fraction of at most kMaxFractionDigits digits (no
// exponent) whose value lies within inclusive or exclusive decimal bounds. Each is a regular
// language over digits: the range is split by the bounds' integer parts, and a fraction next to a
// bound is compared with the bound's fraction digit by digit.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace specula::grammar {

constexpr size_t kMaxIntegerDigits = 18;  // within int64
constexpr size_t kMaxFractionDigits = 15;

// A decimal value: integer digits without leading zeros ("0" for zero), fraction digits without
// trailing zeros; zero is never negative.
struct Decimal {
  bool negative = false;
  std::string integer = "0";
  std::string fraction;
};

// The exact decimal value of a JSON number as written (a double: its shortest round-trip form,
// which is what the schema's text said). Throws specula::Error for a non-number or a non-finite one.
Decimal decimal_of(const nlohmann::ordered_json& number);
// -1, 0, 1 as a < b, a == b, a > b.
int compare(const Decimal& a, const Decimal& b);

struct DecimalBound {
  Decimal value;
  bool inclusive = true;
};

// The integer bounds [lo, hi] a lower and upper bound leave (absent: the grammar's own limit of
// kMaxIntegerDigits digits), or nullopt when no such integer exists.
std::optional<std::pair<int64_t, int64_t>> integer_bounds(const std::optional<DecimalBound>& lo,
                                                          const std::optional<DecimalBound>& hi);

// The decimal digits, with a leading "-" for negatives, of every integer in [lo, hi] (lo <= hi);
// no leading zeros and no "-0".
std::string integer_range_gbnf(int64_t lo, int64_t hi);

// Every number lo <= x <= hi (< and > for exclusive bounds; an absent bound is the grammar's own
// limit), written as described above; nullopt when the grammar can write none.
std::optional<std::string> number_range_gbnf(const std::optional<DecimalBound>& lo,
                                             const std::optional<DecimalBound>& hi);

}  // namespace specula::grammar
