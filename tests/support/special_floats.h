#pragma once
// The float NaN and infinity, for the tests of how kernels and samplers treat them.
#include <limits>

namespace specula::test {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace specula::test
