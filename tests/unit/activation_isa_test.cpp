// The elementwise activations (gelu_tanh_mul, gelu_tanh_inplace, softcap_inplace) give the same
// bytes with the AVX-512 loops as with the portable ones, over ordinary values, both tanh ranges
// and their boundary, huge values, zeros of both signs, infinities and NaN, at lengths that leave
// a partial vector.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "same_bytes.h"
#include "specula/kernels/activation.h"
#include "specula/kernels/isa.h"

namespace specula {
namespace {

using test::same_bytes;

std::vector<float> inputs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  const float specials[] = {0.0f,
                            -0.0f,
                            0.25f,
                            -0.25f,
                            std::nextafter(0.25f, 0.0f),
                            44.0f,
                            -88.0f,
                            1e30f,
                            -1e30f,
                            1e-30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min()};
  for (size_t i = 0; i < std::size(specials) && i < n; ++i) v[i * 7 % n] = specials[i];
  return v;
}

struct Outputs {
  std::vector<float> mul, inplace, softcap;
};

Outputs run(Isa isa, size_t n) {
  set_active_isa(isa);
  const std::vector<float> gate = inputs(n, 1), up = inputs(n, 2);
  Outputs o;
  o.mul.resize(n);
  gelu_tanh_mul(gate.data(), up.data(), o.mul.data(), static_cast<int64_t>(n));
  o.inplace = gate;
  gelu_tanh_inplace(o.inplace.data(), static_cast<int64_t>(n));
  o.softcap = inputs(n, 3);
  for (auto& x : o.softcap) x *= 10.0f;
  softcap_inplace(o.softcap.data(), static_cast<int64_t>(n), 30.0f);
  set_active_isa(detected_isa());
  return o;
}

TEST(ActivationIsa, WideLoopsGiveThePortableBytes) {
  for (size_t n : {1u, 15u, 16u, 17u, 100u, 10240u + 5u}) {
    const Outputs want = run(Isa::Scalar, n);
    const Outputs got = run(detected_isa(), n);
    EXPECT_TRUE(same_bytes(want.mul, got.mul)) << "gelu_tanh_mul, n " << n << ", " << isa_name(detected_isa());
    EXPECT_TRUE(same_bytes(want.inplace, got.inplace)) << "gelu_tanh_inplace, n " << n;
    EXPECT_TRUE(same_bytes(want.softcap, got.softcap)) << "softcap_inplace, n " << n;
  }
}

}  // namespace
}  // namespace specula
