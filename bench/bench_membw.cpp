// Memory read bandwidth on a 2 GiB buffer with 1 and 2 threads: the ceiling the decode matmuls
// (bench_matmul) are compared with. Each thread reads its own contiguous half (like the matmul
// kernels, which split W by rows).
//
//   build-*/bench/bench_membw --benchmark_min_time=0.2 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true  (one line)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "specula/kernels/isa.h"
#include "specula/util/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace specula {
namespace {

constexpr size_t kBufferBytes = 2ull << 30;

struct Buffer {
  uint64_t* data = nullptr;
  Buffer() {
    data = static_cast<uint64_t*>(std::aligned_alloc(64, kBufferBytes));
    std::memset(data, 1, kBufferBytes);  // fault every page in before timing
  }
  ~Buffer() { std::free(data); }
};

Buffer& buffer() {
  static Buffer b;
  return b;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_avx2(const uint64_t* p, size_t words) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const auto* v = reinterpret_cast<const __m256i*>(p);
  for (size_t i = 0; i + 16 <= words; i += 16, v += 4) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(v));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(v + 1));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(v + 2));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(v + 3));
  }
  const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(a, 0) ^ _mm256_extract_epi64(a, 3));
}
#endif

uint64_t read_plain(const uint64_t* p, size_t words) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (size_t i = 0; i + 4 <= words; i += 4) {
    a0 ^= p[i];
    a1 ^= p[i + 1];
    a2 ^= p[i + 2];
    a3 ^= p[i + 3];
  }
  return a0 ^ a1 ^ a2 ^ a3;
}

uint64_t read_range(const uint64_t* p, size_t words) {
#if defined(__x86_64__)
  if (cpu_features().avx2) return read_avx2(p, words);
#endif
  return read_plain(p, words);
}

void BM_MemoryRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  const uint64_t* data = buffer().data;
  const int64_t chunks = 1 << 12;  // 512 KiB chunks, split evenly between the threads
  const size_t chunk_words = kBufferBytes / 8 / chunks;
  uint64_t sink[2] = {0, 0};
  for (auto _ : state) {
    pool.parallel_for(chunks, 1, [&](int worker, int64_t c0, int64_t c1) {
      sink[worker] ^= read_range(data + c0 * chunk_words, (c1 - c0) * chunk_words);
    });
    benchmark::DoNotOptimize(sink);
  }
  state.counters["GB/s"] = benchmark::Counter(kBufferBytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_MemoryRead)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace specula

BENCHMARK_MAIN();
