// Quantized matmul at decode shapes (M = 1..8 rows against Gemma-4-E4B-sized weights).
// Each iteration uses the next of several distinct weight copies (> 256 MB in all), so weights
// stream from DRAM as they do in a real forward pass, not from L3. Counter "GB/s" = weight bytes
// (codes + scales + biases) streamed per second; compare with bench_membw.
//
//   build-*/bench/bench_matmul --benchmark_min_time=0.2 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true  (one line)
#include <benchmark/benchmark.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "specula/kernels/isa.h"
#include "specula/kernels/matmul.h"
#include "specula/util/half.h"

namespace specula {
namespace {

constexpr uint64_t kWorkingSet = 320ull << 20;  // well above any L3 on the test machines

// Distinct copies of one [N, K] affine weight (group 64, bf16 scales), laid out back to back.
struct WeightCopies {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales_biases;
  std::vector<WeightMatrix> copies;
};

const WeightCopies& weight_copies(int64_t n, int64_t k, int bits) {
  static std::map<std::tuple<int64_t, int64_t, int>, std::unique_ptr<WeightCopies>> cache;
  auto& slot = cache[{n, k, bits}];
  if (slot) return *slot;
  slot = std::make_unique<WeightCopies>();
  WeightCopies& wc = *slot;
  const int gs = 64;
  WeightMatrix proto;
  proto.format = WeightFormat::Affine;
  proto.rows = n;
  proto.cols = k;
  proto.bits = bits;
  proto.group_size = gs;
  proto.scale_dtype = DType::BF16;
  const uint64_t per_copy = proto.bytes();
  const int64_t count = static_cast<int64_t>((kWorkingSet + per_copy - 1) / per_copy);
  const int64_t code_bytes = n * proto.row_bytes();
  const int64_t sb = n * (k / gs);
  wc.codes.resize(static_cast<size_t>(count * code_bytes));
  wc.scales_biases.resize(static_cast<size_t>(count * 2 * sb));
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= wc.codes.size(); i += 8) {
    const uint64_t r = rng();
    std::memcpy(&wc.codes[i], &r, 8);
  }
  std::uniform_real_distribution<float> uni(-0.05f, 0.05f);
  for (auto& v : wc.scales_biases) v = f32_to_bf16(uni(rng));
  for (int64_t c = 0; c < count; ++c) {
    WeightMatrix w = proto;
    w.data = wc.codes.data() + c * code_bytes;
    w.scales = wc.scales_biases.data() + c * 2 * sb;
    w.biases = wc.scales_biases.data() + c * 2 * sb + sb;
    wc.copies.push_back(w);
  }
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
  const WeightCopies& wc = weight_copies(n, k, bits);
  ThreadPool& pool = pool_of(threads);
  std::vector<float> x(m * k), y(m * n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (auto& v : x) v = uni(rng);
  size_t next = 0;
  for (auto _ : state) {
    matmul(x.data(), m, wc.copies[next], y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    next = next + 1 == wc.copies.size() ? 0 : next + 1;
  }
  const double bytes = static_cast<double>(wc.copies[0].bytes());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(isa_name(active_isa())));
}

void decode_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"K", "N", "M", "bits", "threads"});
  const int64_t shapes[][2] = {{2560, 10240}, {2560, 2560}, {10240, 2560}};
  for (int threads : {1, 2}) {
    for (int bits : {4, 8}) {
      for (const auto& s : shapes) {
        for (int m : {1, 2, 4, 8}) b->Args({s[0], s[1], m, bits, threads});
      }
    }
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_QuantMatmul)->Apply(decode_shapes);

}  // namespace
}  // namespace specula

BENCHMARK_MAIN();
