#pragma once
// Wall-clock milliseconds since a steady_clock time point: the one timing helper of the stats
// lines and benchmarks.
#include <chrono>

namespace specula {

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace specula
