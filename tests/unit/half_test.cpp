// bf16 / f16 <-> f32 conversions: exact widening, round-to-nearest-even narrowing, NaN/inf,
// subnormals. The narrowing checks compare against oracles built independently of half.h.
#include "specula/util/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace specula {
namespace {

float f(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// The value of an f16 bit pattern from its definition, in double (no bit tricks shared with half.h).
double f16_value(uint16_t h) {
  const int sign = (h & 0x8000u) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0x1f) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

TEST(Bf16, WideningIsExactAndRoundTripsAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits(v), h << 16);
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(v)))) << h;
    } else {
      ASSERT_EQ(f32_to_bf16(v), h) << h;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(f(0x3f808000)), 0x3f80);                      // tie, even below
  EXPECT_EQ(f32_to_bf16(f(0x3f818000)), 0x3f82);                      // tie, even above
  EXPECT_EQ(f32_to_bf16(f(0x3f808001)), 0x3f81);                      // just above the tie
  EXPECT_EQ(f32_to_bf16(f(0x3f807fff)), 0x3f80);                      // just below the tie
  EXPECT_EQ(f32_to_bf16(f(0xbf818000)), 0xbf82);                      // sign does not change the rounding
  EXPECT_EQ(f32_to_bf16(f(0x00018000)), 0x0002);                      // subnormal tie
  EXPECT_EQ(f32_to_bf16(f(0x00008000)), 0x0000);                      // smallest-subnormal tie rounds to zero
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past max bf16
  EXPECT_EQ(f32_to_bf16(f(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
}

TEST(Bf16, NanStaysNan) {
  // Payloads only in the low 16 bits would truncate to infinity without the quieting bit.
  for (uint32_t u : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fffffffu, 0x7f80ffffu}) {
    const uint16_t h = f32_to_bf16(f(u));
    EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << u;
    EXPECT_EQ(h & 0x8000u, (u >> 16) & 0x8000u) << "sign kept";
  }
}

TEST(Bf16, MatchesIndependentRoundingOnSampledFloats) {
  for (uint64_t u = 0; u < (1ull << 32); u += 65521) {
    const float v = f(static_cast<uint32_t>(u));
    if (std::isnan(v)) continue;
    // Candidates: truncation and the next bf16 up (in magnitude); pick the nearer, ties to even.
    const uint32_t lo = static_cast<uint32_t>(u) & 0xffff0000u;
    const uint32_t hi = lo + 0x10000u;
    const double dv = std::fabs(static_cast<double>(v));
    const double dlo = std::fabs(static_cast<double>(f(lo)));
    // The step past the largest finite magnitude goes to infinity; measure it as 2^128.
    const double dhi =
        ((hi & 0x7fffffffu) == 0x7f800000u) ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(f(hi)));
    uint32_t want;
    if (dv - dlo < dhi - dv)
      want = lo;
    else if (dv - dlo > dhi - dv)
      want = hi;
    else
      want = ((lo >> 16) & 1u) ? hi : lo;
    ASSERT_EQ(f32_to_bf16(v), want >> 16) << std::hex << u;
  }
}

TEST(F16, WideningMatchesDefinitionForAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = f16_value(static_cast<uint16_t>(h));
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (f16_is_nan(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000u) != 0) << h;
    }
  }
}

TEST(F16, ExhaustiveRoundTripExceptNan) {
  int checked = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto p = static_cast<uint16_t>(h);
    if (f16_is_nan(p)) {
      EXPECT_TRUE(f16_is_nan(f32_to_f16(f16_to_f32(p)))) << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f16_to_f32(p)), p) << h;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2 * 1023);
}

TEST(F16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even below
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, even above
  EXPECT_EQ(f32_to_f16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(f32_to_f16(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xbc02);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bff);  // below the overflow tie
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                        // tie rounds to even = inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(F16, SubnormalsAndUnderflow) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest f16 subnormal
  EXPECT_EQ(f32_to_f16(tiny), 0x0001);
  EXPECT_EQ(f32_to_f16(tiny / 2), 0x0000);                        // tie -> even (zero)
  EXPECT_EQ(f32_to_f16(std::nextafter(tiny / 2, 1.0f)), 0x0001);  // above the tie
  EXPECT_EQ(f32_to_f16(1.5f * tiny), 0x0002);                     // tie -> even (2)
  EXPECT_EQ(f32_to_f16(2.5f * tiny), 0x0002);                     // tie -> even (2)
  EXPECT_EQ(f32_to_f16(-2.5f * tiny), 0x8002);
  EXPECT_EQ(f32_to_f16(1023.0f * tiny), 0x03ff);         // largest subnormal
  EXPECT_EQ(f32_to_f16(1023.5f * tiny), 0x0400);         // tie rounds up into normals
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -30)), 0x8000);  // underflow keeps the sign
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(F16, NanStaysNan) {
  for (uint32_t u : {0x7f800001u, 0x7fc00000u, 0xffc00000u, 0x7f801fffu}) {
    const uint16_t h = f32_to_f16(f(u));
    EXPECT_TRUE(f16_is_nan(h)) << std::hex << u;
    EXPECT_EQ(h & 0x8000u, (u >> 16) & 0x8000u);
  }
}

// Every sampled float narrows to the nearest finite f16 (ties to even mantissa), or to infinity
// at and beyond 65520, found by search over the table of all finite f16 values.
TEST(F16, MatchesNearestTableEntryOnSampledFloats) {
  std::vector<std::pair<double, uint16_t>> table;  // non-negative finite values, ascending
  for (uint32_t h = 0; h < 0x7c00; ++h) table.emplace_back(f16_value(static_cast<uint16_t>(h)), h);
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) {
    const float v = f(static_cast<uint32_t>(u));
    if (std::isnan(v)) continue;
    const double a = std::fabs(static_cast<double>(v));
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    uint16_t want;
    if (a >= 65520.0) {
      want = 0x7c00;
    } else {
      auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(a, uint16_t{0}));
      if (it == table.end()) it = std::prev(it);
      if (it->first == a || it == table.begin()) {
        want = it->second;
      } else {
        const auto below = std::prev(it);
        const double dlo = a - below->first, dhi = it->first - a;
        want = dlo < dhi ? below->second : dhi < dlo ? it->second : ((below->second & 1u) ? it->second : below->second);
      }
    }
    ASSERT_EQ(f32_to_f16(v), sign | want) << std::hex << u;
  }
}

}  // namespace
}  // namespace specula
