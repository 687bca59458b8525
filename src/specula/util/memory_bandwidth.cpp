#include "specula/util/memory_bandwidth.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

namespace specula {

double measure_read_bandwidth_gbs(ThreadPool& pool, uint64_t bytes, int passes) {
  const uint64_t n = std::max<uint64_t>(bytes / sizeof(uint64_t), 1024);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  pool.parallel_for(static_cast<int64_t>(n), 4096, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  });
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()), 0);
  double best = 0.0;
  for (int pass = 0; pass <= passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(static_cast<int64_t>(n), 4096, [&](int worker, int64_t b, int64_t e) {
      // Four independent accumulators so the adds do not serialize on one register.
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      for (; i < e; ++i) s0 += buf[i];
      sums[static_cast<size_t>(worker)] += s0 + s1 + s2 + s3;
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pass > 0 && s > 0) best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / s / 1e9);
  }
  // Keep the sums observable so the loads are not optimized away.
  volatile uint64_t sink = 0;
  for (uint64_t v : sums) sink = sink + v;
  (void)sink;
  return best;
}

uint64_t peak_rss_bytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024ull;  // Linux reports kilobytes
}

}  // namespace specula
