#pragma once
// Rotary position embedding (docs/gemma4.md §5.1), "rotate-half" pairing: pair j is
// (x[j], x[j + D/2]).
//  * default:      inv_j = theta^(-2j/D) for every j < D/2 (linear: divided by `factor`);
//  * proportional: the first floor(rho*D/2) pairs get inv_j = 1 / (factor * theta^(2j/D)) with the
//                  FULL head dim D in the denominator; the other pairs are not rotated.
// Frequencies and angles are computed in double and rounded once to f32 (cos/sin), which is at
// least as accurate as an f32 evaluation; the rotation itself is f32.
#include <cstdint>
#include <string>
#include <vector>

namespace specula {

struct RopeFrequencies {
  int64_t head_dim = 0;
  std::vector<double> inv_freq;  // one per rotated pair, pairs [0, inv_freq.size())

  int64_t rotated_pairs() const { return static_cast<int64_t>(inv_freq.size()); }
};

// type: "default", "linear" or "proportional"; throws specula::Error on an unknown type, an odd
// head dim or a non-positive theta/factor. `what` names the layer type for messages.
RopeFrequencies make_rope_frequencies(const std::string& type, double theta, double partial_rotary_factor,
                                      double factor, int64_t head_dim, const std::string& what);

// cos/sin of every rotated pair at absolute position `position` (arrays of rotated_pairs()).
void rope_cos_sin(const RopeFrequencies& freqs, int64_t position, float* cos_out, float* sin_out);

// Rotates `heads` consecutive head vectors of length freqs.head_dim in place.
void rope_apply(float* x, int64_t heads, const RopeFrequencies& freqs, const float* cos_v, const float* sin_v);

}  // namespace specula
