// Quantized matmul at Gemma-4-E4B shapes (4-bit g64, K/N = 2560 hidden, 10240 MLP, 2048/512
// q/kv, 262144-row LM head), exact vs fast precision, M = 1, 2, 4, 5, 8 (decode and verify) and
// 512 (prefill), 1 and 2 threads; and the bf16 drafter-sized matmul. Each iteration uses the next
// of several distinct weight copies (> 192 MB in all), so weights stream from DRAM as they do in a
// real forward pass, not from L3. Counter "GB/s" = weight bytes (codes + scales + biases) streamed
// per second; compare with bench_membw. Verify ratio of M rows = time(M) / time(1).
//
//   build-*/bench/bench_matmul --benchmark_min_time=0.2 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true  (one line)
//   --benchmark_filter='BM_QuantMatmul/K:2560/N:262144'   (one shape)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "specula/kernels/isa.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/util/half.h"

namespace specula {
namespace {

constexpr uint64_t kWorkingSet = 192ull << 20;  // well above any L3 on the test machines

// SPECULA_BENCH_WORKING_SET_MB overrides it: a working set that fits in cache measures what the
// kernels compute per second when memory is not the limit.
uint64_t working_set() {
  const char* mb = std::getenv("SPECULA_BENCH_WORKING_SET_MB");
  return mb != nullptr && std::atoll(mb) > 0 ? static_cast<uint64_t>(std::atoll(mb)) << 20 : kWorkingSet;
}

// Distinct copies of one [N, K] affine (group 64, bf16 scales) or bf16 (bits = 16) weight, laid
// out back to back.
struct WeightCopies {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales_biases;
  std::vector<WeightMatrix> copies;
  PackedBuffer packed;  // the affine copies in the fast kernels' layout, as a loaded model holds them
};

const WeightCopies& weight_copies(int64_t n, int64_t k, int bits) {
  // Only the shape being measured is kept (the benchmarks run shape by shape).
  static std::tuple<int64_t, int64_t, int> key;
  static std::unique_ptr<WeightCopies> slot;
  if (slot && key == std::make_tuple(n, k, bits)) return *slot;
  slot.reset();
  key = {n, k, bits};
  slot = std::make_unique<WeightCopies>();
  WeightCopies& wc = *slot;
  const bool dense = bits == 16;
  const int gs = 64;
  WeightMatrix proto;
  proto.format = dense ? WeightFormat::BF16 : WeightFormat::Affine;
  proto.rows = n;
  proto.cols = k;
  proto.bits = dense ? 0 : bits;
  proto.group_size = dense ? 0 : gs;
  proto.scale_dtype = DType::BF16;
  const uint64_t per_copy = proto.bytes();
  const int64_t count = static_cast<int64_t>((working_set() + per_copy - 1) / per_copy);
  const int64_t code_bytes = n * proto.row_bytes();
  const int64_t sb = dense ? 0 : n * (k / gs);
  wc.codes.resize(static_cast<size_t>(count * code_bytes));
  wc.scales_biases.resize(static_cast<size_t>(count * 2 * sb));
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> uni(-0.05f, 0.05f);
  if (dense) {
    for (size_t i = 0; i + 2 <= wc.codes.size(); i += 2) {
      const uint16_t v = f32_to_bf16(uni(rng));
      std::memcpy(&wc.codes[i], &v, 2);
    }
  } else {
    for (size_t i = 0; i + 8 <= wc.codes.size(); i += 8) {
      const uint64_t r = rng();
      std::memcpy(&wc.codes[i], &r, 8);
    }
  }
  for (auto& v : wc.scales_biases) v = f32_to_bf16(uni(rng));
  for (int64_t c = 0; c < count; ++c) {
    WeightMatrix w = proto;
    w.data = wc.codes.data() + c * code_bytes;
    if (!dense) {
      w.scales = wc.scales_biases.data() + c * 2 * sb;
      w.biases = wc.scales_biases.data() + c * 2 * sb + sb;
    }
    wc.copies.push_back(w);
  }
  std::vector<WeightMatrix*> all;
  for (WeightMatrix& w : wc.copies) all.push_back(&w);
  wc.packed = pack_matrices(all, ThreadPool::global());
  return wc;
}

ThreadPool& pool_of(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

void BM_QuantMatmul(benchmark::State& state) {
  const int64_t k = state.range(0), n = state.range(1), m = state.range(2);
  const int bits = static_cast<int>(state.range(3));
  const int threads = static_cast<int>(state.range(4));
  const Precision precision = state.range(5) == 2   ? Precision::Int8
                              : state.range(5) == 1 ? Precision::Fast
                                                    : Precision::Exact;
  const WeightCopies& wc = weight_copies(n, k, bits);
  ThreadPool& pool = pool_of(threads);
  std::vector<float> x(m * k), y(m * n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (auto& v : x) v = uni(rng);
  size_t next = 0;
  for (auto _ : state) {
    matmul(x.data(), m, wc.copies[next], y.data(), pool, precision);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    next = next + 1 == wc.copies.size() ? 0 : next + 1;
  }
  const double bytes = static_cast<double>(wc.copies[0].bytes());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const char* kernel = fast_kernel_name(wc.copies[0], precision);  // nullptr: the exact kernel ran
  state.SetLabel(std::string(isa_name(active_isa())) + " " + precision_name(precision) + " (" +
                 (kernel != nullptr ? kernel : "exact kernel") + ")");
}

// E4B (hidden 2560, MLP 10240, 8 q heads and 2 kv heads of 256, tied 262144-row LM head).
// Args: K, N, M, bits (16 = bf16 dense), threads, fast (0 exact, 1 fast, 2 int8).
void e4b_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"K", "N", "M", "bits", "threads", "fast"});
  struct Shape {
    int64_t k, n;
    int bits;
    bool prefill;
  };
  // Shape by shape (the weight copies are built once per shape): the LM head and the MLP first.
  const Shape shapes[] = {{2560, 262144, 4, false}, {2560, 10240, 4, true}, {10240, 2560, 4, true},
                          {2560, 2048, 4, false},   {2560, 512, 4, false},  {2048, 2560, 4, false},
                          {2560, 10240, 8, false},  {2560, 2560, 16, false}};
  for (const Shape& s : shapes) {
    for (int threads : {1, 2}) {
      for (int fast : {0, 1, 2}) {
        for (int m : {1, 2, 4, 5, 8}) b->Args({s.k, s.n, m, s.bits, threads, fast});
        if (s.prefill && threads == 2) b->Args({s.k, s.n, 512, s.bits, threads, fast});
      }
    }
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_QuantMatmul)->Apply(e4b_shapes);

}  // namespace
}  // namespace specula

BENCHMARK_MAIN();
