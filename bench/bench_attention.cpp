// Decode attention (one query row) at Gemma-4-E4B geometry: 8 query heads over 2 KV heads, head
// dim 256 (sliding layers) and 512 (full layers), contexts 128 / 512 / 2048 keys (and 8k / 32k for the full layers),
// portable (scalar) vs AVX-512 kernels, 1 and 2 threads, f32 and bf16 K/V rows. Several distinct K/V stores are cycled
// so the keys come from memory as they do in a forward pass of 42 layers; they live in huge pages,
// as the model's caches do. Counter "GB/s" = K and V bytes read.
//
//   build-*/bench/bench_attention --benchmark_min_time=0.3
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "specula/kernels/attention.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/kv_type.h"
#include "specula/util/huge_page_buffer.h"

namespace specula {
namespace {

constexpr int64_t kHeads = 8, kKvHeads = 2;
// Distinct stores cycled: more than L3 holds for the larger shapes, so keys stream from DRAM; at
// long contexts one store already is, and fewer keep the bench's memory small.
int stores_for(int64_t keys) { return keys > 4096 ? 2 : 24; }

// One block per store, in huge pages as the model's caches hold them (model/kv_cache.h).
struct KvStores {
  std::vector<HugePageBuffer> k, v, k16, v16;  // f32 rows, and the same values rounded to bf16
  std::vector<const void*> kp, vp, kp16, vp16;
};

// `n` normal random floats.
HugePageBuffer random_rows(int64_t n, std::mt19937& rng) {
  HugePageBuffer b(static_cast<size_t>(n) * sizeof(float), "bench K/V rows");
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto* x = reinterpret_cast<float*>(b.data());
  for (int64_t i = 0; i < n; ++i) x[i] = nd(rng);
  return b;
}

// Rows of dim floats as the bf16 cache stores them.
HugePageBuffer to_bf16(const HugePageBuffer& rows, int64_t n, int64_t dim) {
  HugePageBuffer b(static_cast<size_t>(n) * sizeof(uint16_t), "bench K/V rows");
  const auto* x = reinterpret_cast<const float*>(rows.data());
  for (int64_t i = 0; i < n; i += dim) kv_row_from_f32(KvType::Bf16, x + i, dim, b.data() + i * sizeof(uint16_t));
  return b;
}

const KvStores& stores(int64_t keys, int64_t dim) {
  static int64_t cached_keys = 0, cached_dim = 0;
  static std::unique_ptr<KvStores> slot;
  if (slot && cached_keys == keys && cached_dim == dim) return *slot;
  slot = std::make_unique<KvStores>();
  cached_keys = keys;
  cached_dim = dim;
  std::mt19937 rng(1);
  const int64_t n = keys * kKvHeads * dim;
  for (int s = 0; s < stores_for(keys); ++s) {
    slot->k.push_back(random_rows(n, rng));
    slot->v.push_back(random_rows(n, rng));
    slot->kp.push_back(slot->k.back().data());
    slot->vp.push_back(slot->v.back().data());
    slot->k16.push_back(to_bf16(slot->k.back(), n, dim));
    slot->v16.push_back(to_bf16(slot->v.back(), n, dim));
    slot->kp16.push_back(slot->k16.back().data());
    slot->vp16.push_back(slot->v16.back().data());
  }
  return *slot;
}

void BM_DecodeAttention(benchmark::State& state) {
  const int64_t keys = state.range(0);
  const int64_t dim = state.range(1);
  const bool wide = state.range(2) != 0;
  const int threads = static_cast<int>(state.range(3));
  const KvType type = state.range(4) != 0 ? KvType::Bf16 : KvType::F32;
  if (wide && detected_isa() != Isa::Avx512) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  const KvStores& kv = stores(keys, dim);
  set_active_isa(wide ? Isa::Avx512 : Isa::Scalar);
  ThreadPool pool(threads);
  std::vector<float> q(static_cast<size_t>(kHeads * dim), 0.01f), out(q.size());
  AttentionParams p;
  p.heads = kHeads;
  int s = 0;
  for (auto _ : state) {
    KvStoreView view;
    view.k_blocks = type == KvType::Bf16 ? &kv.kp16[s] : &kv.kp[s];
    view.v_blocks = type == KvType::Bf16 ? &kv.vp16[s] : &kv.vp[s];
    view.type = type;
    view.block_rows = keys;
    view.kv_heads = kKvHeads;
    view.head_dim = dim;
    attention(q.data(), 1, kHeads * dim, keys - 1, view, p, out.data(), kHeads * dim, pool);
    benchmark::DoNotOptimize(out.data());
    s = (s + 1) % stores_for(keys);
  }
  set_active_isa(detected_isa());
  const double bytes = 2.0 * static_cast<double>(keys * kKvHeads * kv_head_row_bytes(type, dim));
  state.counters["GB/s"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"keys", "dim", "avx512", "threads", "bf16"})
    ->ArgsProduct({{128, 512, 2048}, {256, 512}, {0, 1}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Long contexts (the full layers' share of a decode step at 8k and 32k), the AVX-512 kernels.
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"keys", "dim", "avx512", "threads", "bf16"})
    ->ArgsProduct({{8192, 32768}, {512}, {1}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace specula

BENCHMARK_MAIN();
