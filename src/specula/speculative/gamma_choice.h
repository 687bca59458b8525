#pragma once
// The draft length a generation asks for: a fixed gamma or `auto` (speculative/gamma_policy.h). With
// sampling, `auto` decides from acceptance alone (nominal costs, not timings), so a seed reproduces
// the same tokens on every run; greedy output never depends on gamma.
#include <cstdint>
#include <string>

namespace specula {

struct GammaChoice {
  bool automatic = false;  // choose each round (speculative/gamma_policy.h)
  int64_t fixed = 2;       // used when !automatic; 0 = plain decoding through the verify path
  int64_t max_gamma = 8;   // automatic: the largest gamma considered
};
// "auto" or a non-negative integer; throws specula::Error naming the value.
GammaChoice parse_gamma_choice(const std::string& text);

}  // namespace specula
