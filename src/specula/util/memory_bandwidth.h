#pragma once
// The machine's measured main-memory read bandwidth, the ceiling that memory-bound decode is
// compared against (docs/performance.md, "The roofline"), and the process's peak resident set size.
#include <cstdint>

#include "specula/util/thread_pool.h"

namespace specula {

// Sums a `bytes`-sized buffer (much larger than the caches) `passes` times with every thread of
// `pool`, after one warm-up pass; returns the best pass in GB/s (1e9 bytes per second).
double measure_read_bandwidth_gbs(ThreadPool& pool, uint64_t bytes = 1ull << 30, int passes = 3);

// Peak resident set size of this process since start or since the last successful
// reset_peak_rss(), in bytes: /proc/self/status VmHWM, else getrusage ru_maxrss.
uint64_t peak_rss_bytes();

// Resets the kernel's peak-RSS mark to the current RSS (Linux: "5" into /proc/self/clear_refs), so
// that one benchmark phase's peak excludes earlier phases. Returns false where that is unsupported
// (the peak then keeps counting from process start).
bool reset_peak_rss();

}  // namespace specula
