#include "specula/util/memory_bandwidth.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace specula {

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, uint64_t bytes)
    : pool_(pool),
      words_(std::max<uint64_t>(bytes / sizeof(uint64_t), 1024)),
      buf_(new uint64_t[words_]),
      sums_(static_cast<size_t>(pool.size()), 0) {
  pool_.parallel_for(static_cast<int64_t>(words_), 4096, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf_[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  });
}

double ReadBandwidthProbe::sample_gbs() {
  const uint64_t* buf = buf_.get();
  const auto t0 = std::chrono::steady_clock::now();
  pool_.parallel_for(static_cast<int64_t>(words_), 4096, [&](int worker, int64_t b, int64_t e) {
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
    sums_[static_cast<size_t>(worker)] += s0 + s1 + s2 + s3;
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile uint64_t sink = 0;
  for (uint64_t v : sums_) sink = sink + v;
  (void)sink;
  return s > 0 ? static_cast<double>(words_ * sizeof(uint64_t)) / s / 1e9 : 0.0;
}

double measure_read_bandwidth_gbs(ThreadPool& pool, uint64_t bytes, int passes) {
  ReadBandwidthProbe probe(pool, bytes);
  probe.sample_gbs();  // warm-up
  double best = 0.0;
  for (int pass = 0; pass < passes; ++pass) best = std::max(best, probe.sample_gbs());
  return best;
}

namespace {
// "VmHWM:   123456 kB" from /proc/self/status; 0 if unavailable.
uint64_t proc_status_hwm_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long v = 0;
    if (std::strncmp(line, "VmHWM:", 6) == 0 && std::sscanf(line + 6, "%llu", &v) == 1) {
      kb = v;
      break;
    }
  }
  std::fclose(f);
  return kb * 1024ull;
}
}  // namespace

uint64_t peak_rss_bytes() {
  if (const uint64_t hwm = proc_status_hwm_bytes(); hwm > 0) return hwm;
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024ull;  // Linux reports kilobytes
}

bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace specula
