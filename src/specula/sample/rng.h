#pragma once
// specula's sampling random number generator: xoshiro256** (Blackman & Vigna) seeded through
// splitmix64. Pure 64-bit integer arithmetic, so one seed gives the same draws on every machine,
// compiler and thread count. The state is four words that can be saved and restored, which lets a
// caller checkpoint a generation (or a speculative round) and replay it exactly.
#include <array>
#include <cstdint>

namespace specula {

struct RngState {
  std::array<uint64_t, 4> words{};
  bool operator==(const RngState&) const = default;
};

class Rng {
 public:
  // Seeds stream 0 of `seed`. Different streams of one seed are independent sequences (use one per
  // consumer, e.g. drafter vs verifier, so that how many values one draws never shifts the other).
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0);

  // The next 64 random bits.
  uint64_t next_u64();

  // Uniform double in [0, 1): the top 53 bits of next_u64() times 2^-53 (every value is a multiple
  // of 2^-53, exactly representable; 1.0 is never returned). Consumes exactly one next_u64().
  double uniform();

  RngState state() const { return state_; }
  // Throws specula::Error for the all-zero state (xoshiro's one fixed point).
  void set_state(const RngState& state);

 private:
  RngState state_;
};

// A fresh seed from the operating system's entropy (std::random_device), for a generation that
// names none: unseeded sampling differs from run to run, as OpenAI's API does; the seed is
// reported so that the run can be reproduced. Below 2^53, so that every JSON client (JavaScript's
// numbers among them) reads it back exactly.
uint64_t fresh_seed();

}  // namespace specula
