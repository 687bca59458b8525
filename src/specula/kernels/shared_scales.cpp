#include "specula/kernels/shared_scales.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <numeric>

namespace specula {

// Every nonzero value is an odd integer times a power of two; the factor is the greatest common
// divisor of the odd parts times the smallest power, so each value over it is an integer (and the
// factor, no larger than any value, is representable). Zeros come out as factor * 0, so the
// factor takes their sign.
bool factor_shared_scale(const float* values, int n, float& factor, int8_t* multipliers) {
  if (n <= 0) return false;
  uint32_t odd_gcd = 0;
  int min_exp = INT_MAX;
  int zero_sign = -1;  // unknown until a zero is seen
  for (int i = 0; i < n; ++i) {
    const auto bits = std::bit_cast<uint32_t>(values[i]);
    const uint32_t exp_bits = (bits >> 23) & 0xffu, fraction = bits & 0x7fffffu;
    if (exp_bits == 0xffu) return false;  // infinity or NaN
    if (exp_bits == 0 && fraction == 0) {
      const int sign = static_cast<int>(bits >> 31);
      if (zero_sign >= 0 && zero_sign != sign) return false;
      zero_sign = sign;
      continue;
    }
    const uint32_t m = exp_bits == 0 ? fraction : (fraction | 0x800000u);
    const int tz = std::countr_zero(m);
    const uint32_t odd = m >> tz;
    if (odd_gcd == 0 || odd % odd_gcd != 0) odd_gcd = std::gcd(odd_gcd, odd);
    min_exp = std::min(min_exp, (exp_bits == 0 ? -149 : static_cast<int>(exp_bits) - 150) + tz);
  }
  const float magnitude = odd_gcd == 0 ? 1.0f : std::ldexp(static_cast<float>(odd_gcd), min_exp);
  // Each value over the factor (an exact division where it is an integer), then the product
  // checked bit for bit.
  auto fill = [&](bool negative_factor) {
    const float f = negative_factor ? -magnitude : magnitude;
    for (int i = 0; i < n; ++i) {
      const float q = values[i] / f;
      if (!(q >= -128.0f && q <= 127.0f)) return false;
      multipliers[i] = static_cast<int8_t>(q);
      if (std::bit_cast<uint32_t>(f * static_cast<float>(multipliers[i])) != std::bit_cast<uint32_t>(values[i]))
        return false;
    }
    factor = f;
    return true;
  };
  // Without zeros either sign works but for a ratio of +-128 (a Q6_K sc of -128 with a negative d).
  if (zero_sign == 1) return fill(true);
  return fill(false) || (zero_sign < 0 && fill(true));
}

}  // namespace specula
