#include "specula/bench/synthetic_kv.h"

#include <algorithm>
#include <vector>

namespace specula::bench {

namespace {

// Uniform values in [-sqrt(3), sqrt(3)] (unit variance) from a 32-bit LCG: fast enough to write
// gigabytes of rows.
void fill_row(uint32_t& state, std::vector<float>& row) {
  constexpr float kScale = 1.7320508f / 2147483648.0f;
  for (float& x : row) {
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(state)) * kScale;
  }
}

}  // namespace

void fill_with_synthetic_rows(const TargetModel& model, TargetCache& cache, int64_t positions, uint32_t seed) {
  const int layers = static_cast<int>(model.config().layers.size());
  std::vector<KvCache*> owned;
  int64_t chunk = 256;  // positions per reserve_write: within every ring's limit
  for (int l = 0; l < layers; ++l) {
    if (!cache.owns(l)) continue;
    owned.push_back(&cache.for_layer(l));
    if (owned.back()->is_ring()) chunk = std::min(chunk, owned.back()->max_write());
  }
  const int64_t end = cache.offset() + positions;
  uint32_t state = seed;
  std::vector<float> k, v;
  for (int64_t first = cache.offset(); first < end; first += chunk) {
    const int64_t n = std::min(chunk, end - first);
    for (KvCache* c : owned) {
      c->reserve_write(n);
      k.resize(static_cast<size_t>(c->row_elements()));
      v.resize(k.size());
      for (int64_t p = first; p < first + n; ++p) {
        if (c->is_ring() && p < end - c->capacity()) continue;  // overwritten before the end
        fill_row(state, k);
        fill_row(state, v);
        c->write(p, k.data(), v.data());
      }
    }
    cache.advance(n);
  }
}

}  // namespace specula::bench
