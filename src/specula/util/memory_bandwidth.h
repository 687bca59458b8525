#pragma once
// The machine's measured main-memory read bandwidth, the ceiling that memory-bound decode is
// compared against (docs/performance.md, "The roofline"), and the process's peak resident set size.
#include <cstdint>
#include <memory>
#include <vector>

#include "specula/util/thread_pool.h"

namespace specula {

// A buffer much larger than the caches, summed by every thread of a pool: one pass is one sample
// of the read bandwidth. Kept between samples so that a benchmark can take them in turn with the
// figures it times, under the same state of the machine.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(ThreadPool& pool, uint64_t bytes);
  double sample_gbs();  // one pass, in GB/s (1e9 bytes per second)

 private:
  ThreadPool& pool_;
  uint64_t words_;
  std::unique_ptr<uint64_t[]> buf_;  // filled by the pool's threads, not zeroed first by one
  std::vector<uint64_t> sums_;       // per worker, kept observable so the loads stay
};

// Sums a `bytes`-sized buffer `passes` times with every thread of `pool`, after one warm-up pass;
// returns the best pass in GB/s.
double measure_read_bandwidth_gbs(ThreadPool& pool, uint64_t bytes = 1ull << 30, int passes = 3);

// Peak resident set size of this process since start or since the last successful
// reset_peak_rss(), in bytes: /proc/self/status VmHWM, else getrusage ru_maxrss.
uint64_t peak_rss_bytes();

// Resets the kernel's peak-RSS mark to the current RSS (Linux: "5" into /proc/self/clear_refs), so
// that one benchmark phase's peak excludes earlier phases. Returns false where that is unsupported
// (the peak then keeps counting from process start).
bool reset_peak_rss();

}  // namespace specula
