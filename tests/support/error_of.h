#pragma once
// Helpers shared by the file-format and validation tests: deterministic byte patterns, the message
// of the specula::Error a call throws, and the check that the message names every expected part.
#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "specula/util/error.h"

namespace specula::test {

inline std::vector<std::byte> pattern_bytes(size_t n, unsigned seed) {
  std::vector<std::byte> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((i * 131 + seed * 17 + 7) & 0xff);
  return b;
}

// Returns the message of the specula::Error that `f` throws; fails the test if it throws nothing
// or something else.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected specula::Error, got std::exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected specula::Error, nothing thrown";
  return {};
}

// Asserts that `f` throws specula::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    return;
  }
  ADD_FAILURE() << "no specula::Error thrown";
}

}  // namespace specula::test
