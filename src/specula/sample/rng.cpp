#include "specula/sample/rng.h"

#include <random>

#include "specula/util/error.h"

namespace specula {
namespace {

// splitmix64: expands one 64-bit seed into well-mixed words (never all zero for xoshiro).
uint64_t splitmix64(uint64_t& x) {
  x += 0x9e3779b97f4a7c15ull;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream) {
  // The stream index is mixed in before expansion so that (seed, stream) pairs that differ in
  // either component start from unrelated states.
  uint64_t s = stream;
  uint64_t x = seed ^ splitmix64(s);
  for (uint64_t& w : state_.words) w = splitmix64(x);
  if (state_.words == std::array<uint64_t, 4>{}) state_.words[0] = 1;  // unreachable in practice
}

uint64_t Rng::next_u64() {
  auto& s = state_.words;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

void Rng::set_state(const RngState& state) {
  if (state.words == std::array<uint64_t, 4>{}) fail("rng: the all-zero state is not a valid xoshiro256** state");
  state_ = state;
}

uint64_t fresh_seed() {
  std::random_device device;
  const uint64_t bits = (static_cast<uint64_t>(device()) << 32) | device();
  return bits & ((uint64_t{1} << 53) - 1);
}

}  // namespace specula
