#pragma once
// Group scales (or biases) that are one f32 factor times small integers. A GGUF K-quant's group
// scales are d * sc[s] and its biases -dmin * m[s] (or -32 d * sc[s]), with d an f16 per 256
// inputs and sc, m integers of 6 or 8 bits, so the packed layout (kernels/packed_affine.h) can keep
// per superblock and row one f32 factor, and per group an int8, instead of an f32 per group.
#include <cstdint>

namespace specula {

// Finds `factor` and multipliers[0..n) with factor * float(multipliers[i]) == values[i] bit for
// bit, the sign of a zero included (a product whose true value is representable rounds to it).
// False when there are none: a NaN or an infinity, zeros of both signs, or a ratio beyond int8.
bool factor_shared_scale(const float* values, int n, float& factor, int8_t* multipliers);

// The affine formats whose parameters the fast kernels read as shared factors: 4- and 5-bit groups
// of 32 and 8-bit groups of 16 (what GGUF Q4_K, Q5_K and Q6_K load as).
inline bool shared_factor_format(int bits, int group_size) {
  return ((bits == 4 || bits == 5) && group_size == 32) || (bits == 8 && group_size == 16);
}

}  // namespace specula
