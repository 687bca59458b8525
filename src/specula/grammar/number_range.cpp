#include "specula/grammar/number_range.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "specula/util/error.h"

namespace specula::grammar {
namespace {

constexpr int64_t kIntegerLimit = 999999999999999999;  // kMaxIntegerDigits nines

std::string alternatives(const std::vector<std::string>& alts) {
  return alts.size() == 1 ? alts[0] : "( " + fmt::format("{}", fmt::join(alts, " | ")) + " )";
}

// Digits of a non-negative integer range [lo, hi] of equal digit count, as a GBNF sequence.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  // Every digit string of this length: keeps the recursion linear in the digit count.
  if (lo.find_first_not_of('0') == std::string::npos && hi.find_first_not_of('9') == std::string::npos)
    return fmt::format("[0-9]{{{}}}", lo.size());
  if (lo.size() == 1) return lo == hi ? fmt::format("\"{}\"", lo) : fmt::format("[{}-{}]", lo, hi);
  if (lo[0] == hi[0]) return fmt::format("\"{}\" {}", lo[0], same_length_range(lo.substr(1), hi.substr(1)));
  const size_t rest = lo.size() - 1;
  std::vector<std::string> alts;
  alts.push_back(fmt::format("\"{}\" ( {} )", lo[0], same_length_range(lo.substr(1), std::string(rest, '9'))));
  if (hi[0] - lo[0] > 1)
    alts.push_back(
        fmt::format("[{}-{}] [0-9]{{{}}}", static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1), rest));
  alts.push_back(fmt::format("\"{}\" ( {} )", hi[0], same_length_range(std::string(rest, '0'), hi.substr(1))));
  return "( " + fmt::format("{}", fmt::join(alts, " | ")) + " )";
}

// Decimal digits (no leading zeros) of every integer in [lo, hi], 0 <= lo <= hi.
std::string unsigned_range(uint64_t lo, uint64_t hi) {
  std::vector<std::string> alts;
  uint64_t band_lo = lo;
  while (band_lo <= hi) {
    const std::string lo_s = std::to_string(band_lo);
    uint64_t band_max = 9;
    for (size_t i = 1; i < lo_s.size(); ++i) band_max = band_max * 10 + 9;
    const uint64_t band_hi = std::min(hi, band_max);
    alts.push_back(same_length_range(lo_s, std::to_string(band_hi)));
    if (band_hi == hi) break;
    band_lo = band_hi + 1;
  }
  return alternatives(alts);
}

// A bound on what the fraction digits still to come may add: 0.R >= 0.digits (lower) or
// 0.R <= 0.digits (upper), strict when not inclusive. No lower bound is {"", true}.
struct FractionBound {
  std::string digits;
  bool inclusive = true;
  bool operator==(const FractionBound&) const = default;
};

bool allows_zero_lower(const FractionBound& lower) { return lower.digits.empty() && lower.inclusive; }
bool allows_zero_upper(const std::optional<FractionBound>& upper) {
  return !upper || !upper->digits.empty() || upper->inclusive;
}

// The bound left for the digits after a first digit d; nullopt in `possible` when d breaks it.
std::optional<FractionBound> lower_after(const FractionBound& lower, int d, bool& possible) {
  if (lower.digits.empty()) {
    if (lower.inclusive || d > 0) return FractionBound{};
    return lower;  // still above zero, strictly
  }
  const int first = lower.digits[0] - '0';
  if (d < first) possible = false;
  if (d != first) return FractionBound{};
  return FractionBound{lower.digits.substr(1), lower.inclusive};
}

std::optional<FractionBound> upper_after(const std::optional<FractionBound>& upper, int d, bool& possible) {
  if (!upper) return std::nullopt;
  const int first = upper->digits.empty() ? 0 : upper->digits[0] - '0';
  if (d > first) possible = false;
  if (d < first) return std::nullopt;
  return FractionBound{upper->digits.empty() ? "" : upper->digits.substr(1), upper->inclusive};
}

// One to `room` fraction digits R with lower <= 0.R <= upper; nullopt when there are none.
std::optional<std::string> fraction_digits(const FractionBound& lower, const std::optional<FractionBound>& upper,
                                           size_t room) {
  if (room == 0) return std::nullopt;
  if (allows_zero_lower(lower) && !upper) return fmt::format("[0-9]{{1,{}}}", room);
  // Digits that leave the same bounds behind form one character range.
  struct Group {
    int first, last;
    FractionBound lower;
    std::optional<FractionBound> upper;
  };
  std::vector<Group> groups;
  for (int d = 0; d <= 9; ++d) {
    bool possible = true;
    FractionBound next_lower = *lower_after(lower, d, possible);
    std::optional<FractionBound> next_upper = upper_after(upper, d, possible);
    if (!possible) continue;
    if (!groups.empty() && groups.back().last == d - 1 && groups.back().lower == next_lower &&
        groups.back().upper == next_upper)
      groups.back().last = d;
    else
      groups.push_back({d, d, next_lower, next_upper});
  }
  std::vector<std::string> alts;
  for (const Group& g : groups) {
    const std::string digit =
        g.first == g.last ? fmt::format("\"{}\"", g.first) : fmt::format("[{}-{}]", g.first, g.last);
    const bool may_stop = allows_zero_lower(g.lower) && allows_zero_upper(g.upper);
    const std::optional<std::string> more = fraction_digits(g.lower, g.upper, room - 1);
    if (more)
      alts.push_back(digit + (may_stop ? " ( " + *more + " )?" : " " + *more));
    else if (may_stop)
      alts.push_back(digit);
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

// The optional "." and fraction after an integer part; "" when only no fraction fits, nullopt
// when nothing fits.
std::optional<std::string> fraction_part(const FractionBound& lower, const std::optional<FractionBound>& upper) {
  const bool may_omit = allows_zero_lower(lower) && allows_zero_upper(upper);
  const std::optional<std::string> digits = fraction_digits(lower, upper, kMaxFractionDigits);
  if (!digits) return may_omit ? std::optional<std::string>("") : std::nullopt;
  return may_omit ? "( \".\" " + *digits + " )?" : "\".\" " + *digits;
}

// A magnitude bound with its integer part as a number; nullopt past kMaxIntegerDigits digits.
std::optional<uint64_t> integer_part(const Decimal& d) {
  if (d.integer.size() > kMaxIntegerDigits) return std::nullopt;
  return std::stoull(d.integer);
}

// Every magnitude (a non-negative number without sign) within [lower, upper]; no lower bound is
// zero inclusive, no upper bound is the grammar's limit.
std::optional<std::string> magnitude_range(const std::optional<DecimalBound>& lower,
                                           const std::optional<DecimalBound>& upper) {
  uint64_t lo = 0;
  FractionBound lo_fraction;
  if (lower) {
    const std::optional<uint64_t> i = integer_part(lower->value);
    if (!i) return std::nullopt;  // above every number the grammar writes
    lo = *i;
    lo_fraction = {lower->value.fraction, lower->inclusive};
  }
  uint64_t hi = static_cast<uint64_t>(kIntegerLimit);
  std::optional<FractionBound> hi_fraction;
  if (upper) {
    if (const std::optional<uint64_t> i = integer_part(upper->value)) {
      hi = *i;
      hi_fraction = FractionBound{upper->value.fraction, upper->inclusive};
    }
  }
  if (lo > hi) return std::nullopt;
  std::vector<std::string> alts;
  auto add = [&](const std::string& integer, const std::optional<std::string>& fraction) {
    if (fraction) alts.push_back(fraction->empty() ? integer : integer + " " + *fraction);
  };
  if (lo == hi) {
    add(fmt::format("\"{}\"", lo), fraction_part(lo_fraction, hi_fraction));
  } else {
    add(fmt::format("\"{}\"", lo), fraction_part(lo_fraction, std::nullopt));
    if (lo + 1 < hi) add(unsigned_range(lo + 1, hi - 1), fraction_part({}, std::nullopt));
    add(fmt::format("\"{}\"", hi), fraction_part({}, hi_fraction));
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

bool is_zero(const Decimal& d) { return d.integer == "0" && d.fraction.empty(); }

Decimal magnitude(Decimal d) {
  d.negative = false;
  return d;
}

// The integer value of `d`'s integer part, clipped to the grammar's limit, with its sign.
int64_t clipped_integer(const Decimal& d) {
  const int64_t v = d.integer.size() > kMaxIntegerDigits ? kIntegerLimit : std::stoll(d.integer);
  return d.negative ? -v : v;
}

}  // namespace

Decimal decimal_of(const nlohmann::ordered_json& number) {
  if (!number.is_number()) fail("a bound must be a number");
  if (number.is_number_float() && !std::isfinite(number.get<double>())) fail("a bound must be finite");
  // nlohmann writes integers exactly and doubles in their shortest round-trip form, e.g. "0.1",
  // "1e-05", "1.5e+20".
  const std::string text = number.dump();
  Decimal d;
  size_t i = 0;
  if (text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;
  int64_t point = -1;  // digits before the decimal point
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.')
      point = static_cast<int64_t>(digits.size());
    else
      digits += text[i];
  }
  if (point < 0) point = static_cast<int64_t>(digits.size());
  if (i < text.size()) point += std::stoll(text.substr(i + 1));
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<int64_t>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  d.integer = digits.substr(0, static_cast<size_t>(point));
  d.fraction = digits.substr(static_cast<size_t>(point));
  d.integer.erase(0, std::min(d.integer.find_first_not_of('0'), d.integer.size()));
  if (d.integer.empty()) d.integer = "0";
  d.fraction.erase(std::min(d.fraction.find_last_not_of('0') + 1, d.fraction.size()));
  if (is_zero(d)) d.negative = false;
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int m = 0;  // magnitudes
  if (a.integer.size() != b.integer.size())
    m = a.integer.size() < b.integer.size() ? -1 : 1;
  else if (a.integer != b.integer)
    m = a.integer < b.integer ? -1 : 1;
  else if (a.fraction != b.fraction)
    m = a.fraction < b.fraction ? -1 : 1;  // no trailing zeros: string order is value order
  return a.negative ? -m : m;
}

std::optional<std::pair<int64_t, int64_t>> integer_bounds(const std::optional<DecimalBound>& lo,
                                                          const std::optional<DecimalBound>& hi) {
  int64_t low = -kIntegerLimit, high = kIntegerLimit;
  if (lo) {
    const Decimal& v = lo->value;
    // The least integer above (or at, when inclusive) v; ceil of a negative drops its fraction.
    int64_t i = clipped_integer(v);
    if (!v.fraction.empty() ? !v.negative : !lo->inclusive) i += 1;
    low = std::max(low, i);
  }
  if (hi) {
    const Decimal& v = hi->value;
    int64_t i = clipped_integer(v);
    if (!v.fraction.empty() ? v.negative : !hi->inclusive) i -= 1;
    high = std::min(high, i);
  }
  if (low > high) return std::nullopt;
  return std::pair{low, high};
}

std::string integer_range_gbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) {
    const uint64_t neg_hi = static_cast<uint64_t>(-(lo + 1)) + 1;  // |lo| without overflow
    const uint64_t neg_lo = hi < 0 ? static_cast<uint64_t>(-(hi + 1)) + 1 : 1;
    alts.push_back("\"-\" " + unsigned_range(neg_lo, neg_hi));
  }
  if (hi >= 0)
    alts.push_back(unsigned_range(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi)));
  return alternatives(alts);
}

std::optional<std::string> number_range_gbnf(const std::optional<DecimalBound>& lo,
                                             const std::optional<DecimalBound>& hi) {
  std::vector<std::string> alts;
  const bool lo_negative = lo && lo->value.negative;
  const bool hi_negative = hi && hi->value.negative;
  // Zero and above, unsigned: from max(lo, 0) up to hi.
  if (!hi_negative) {
    const std::optional<DecimalBound> lower = lo_negative ? std::nullopt : lo;
    if (const auto m = magnitude_range(lower, hi)) alts.push_back(*m);
  }
  // Below zero, after "-": magnitudes from |min(hi, 0)| (zero itself excluded: written unsigned)
  // up to |lo|.
  if (!lo || lo_negative) {
    const DecimalBound lower =
        hi_negative ? DecimalBound{magnitude(hi->value), hi->inclusive} : DecimalBound{Decimal{}, false};
    const std::optional<DecimalBound> upper =
        lo ? std::optional<DecimalBound>(DecimalBound{magnitude(lo->value), lo->inclusive}) : std::nullopt;
    if (const auto m = magnitude_range(lower, upper)) alts.push_back("\"-\" " + *m);
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

}  // namespace specula::grammar
