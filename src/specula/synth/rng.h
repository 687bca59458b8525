#pragma once
// Counter-based random values for synthetic checkpoints: every value is a pure function of
// (seed, key, element index), so a tensor's bytes do not depend on how the writer chunks it, on the
// thread count, or on which other tensors exist.
#include <cstdint>
#include <string_view>

#include "specula/util/cache_key.h"

namespace specula::synth {

// splitmix64's output function: a bijective 64-bit mixer with good avalanche.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The stream key of one named value source under one seed.
inline uint64_t stream_key(uint64_t seed, std::string_view name) {
  return mix64(mix64(seed ^ 0x5851f42d4c957f2dull) ^ fnv1a64(name));
}

// The 64 random bits of element `index` of a stream (splitmix64's sequence, indexed directly).
inline uint64_t stream_bits(uint64_t key, uint64_t index) { return mix64(key + (index + 1) * 0x9e3779b97f4a7c15ull); }

// Uniform in [0, 1) from the top 24 bits (exact in float).
inline float unit_uniform(uint64_t bits) { return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f); }

// Approximately standard normal: the Irwin-Hall sum of four 16-bit uniforms, centred and scaled to
// unit variance. Bounded tails (|x| <= 2*sqrt(3)) keep quantization ranges tame.
inline float approx_normal(uint64_t bits) {
  float sum = 0.0f;
  for (int k = 0; k < 4; ++k) {
    sum += (static_cast<float>((bits >> (16 * k)) & 0xffffu) + 0.5f) * (1.0f / 65536.0f);
  }
  return (sum - 2.0f) * 1.7320508075688772f;
}

}  // namespace specula::synth
