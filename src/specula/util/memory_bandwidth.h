#pragma once
// The machine's measured main-memory read bandwidth, the ceiling that memory-bound decode is
// compared against (DESIGN.md §4), and the process's peak resident set size.
#include <cstdint>

#include "specula/util/thread_pool.h"

namespace specula {

// Sums a `bytes`-sized buffer (much larger than the caches) `passes` times with every thread of
// `pool`, after one warm-up pass; returns the best pass in GB/s (1e9 bytes per second).
double measure_read_bandwidth_gbs(ThreadPool& pool, uint64_t bytes = 1ull << 30, int passes = 3);

// Peak resident set size of this process so far, in bytes (getrusage ru_maxrss).
uint64_t peak_rss_bytes();

}  // namespace specula
