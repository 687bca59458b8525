#pragma once
// Whether two float vectors hold the same bytes, for the tests that kernels agree bit for bit.
#include <cstring>
#include <vector>

namespace specula::test {

inline bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace specula::test
