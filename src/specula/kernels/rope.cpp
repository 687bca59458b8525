#include "specula/kernels/rope.h"

#include <cmath>

#include "specula/util/error.h"

namespace specula {

RopeFrequencies make_rope_frequencies(const std::string& type, double theta, double partial_rotary_factor,
                                      double factor, int64_t head_dim, const std::string& what) {
  if (head_dim <= 0 || head_dim % 2 != 0) fail("RoPE for {}: head dim {} must be positive and even", what, head_dim);
  if (!(theta > 0.0)) fail("RoPE for {}: rope_theta {} must be positive", what, theta);
  if (!(factor > 0.0)) fail("RoPE for {}: factor {} must be positive", what, factor);
  RopeFrequencies f;
  f.head_dim = head_dim;
  const int64_t half = head_dim / 2;
  const double d = static_cast<double>(head_dim);
  if (type == "default" || type == "linear") {
    const double scale = type == "linear" ? 1.0 / factor : 1.0;
    f.inv_freq.resize(static_cast<size_t>(half));
    for (int64_t j = 0; j < half; ++j) f.inv_freq[j] = scale * std::pow(theta, -2.0 * static_cast<double>(j) / d);
  } else if (type == "proportional") {
    if (!(partial_rotary_factor > 0.0 && partial_rotary_factor <= 1.0))
      fail("RoPE for {}: partial_rotary_factor {} must be in (0, 1]", what, partial_rotary_factor);
    // HF: rope_angles = int(rho * D / 2); denominators use the full D.
    const int64_t pairs = static_cast<int64_t>(partial_rotary_factor * d / 2.0);
    f.inv_freq.resize(static_cast<size_t>(pairs));
    for (int64_t j = 0; j < pairs; ++j)
      f.inv_freq[j] = 1.0 / (factor * std::pow(theta, 2.0 * static_cast<double>(j) / d));
  } else {
    fail("RoPE for {}: unsupported rope_type \"{}\" (expected default, linear or proportional)", what, type);
  }
  return f;
}

void rope_cos_sin(const RopeFrequencies& freqs, int64_t position, float* cos_out, float* sin_out) {
  const double p = static_cast<double>(position);
  for (int64_t j = 0; j < freqs.rotated_pairs(); ++j) {
    const double angle = p * freqs.inv_freq[j];
    cos_out[j] = static_cast<float>(std::cos(angle));
    sin_out[j] = static_cast<float>(std::sin(angle));
  }
}

void rope_apply(float* x, int64_t heads, const RopeFrequencies& freqs, const float* cos_v, const float* sin_v) {
  const int64_t d = freqs.head_dim;
  const int64_t half = d / 2;
  const int64_t pairs = freqs.rotated_pairs();
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * d;
    for (int64_t j = 0; j < pairs; ++j) {
      const float x1 = v[j];
      const float x2 = v[j + half];
      v[j] = x1 * cos_v[j] - x2 * sin_v[j];
      v[j + half] = x1 * sin_v[j] + x2 * cos_v[j];
    }
  }
}

}  // namespace specula
