// softmax_exp against the exact exponential, and the softmax numerators of the AVX2 and AVX-512
// kernels against the portable loops' bytes.
#include "specula/kernels/softmax_exp.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "specula/kernels/attention.h"
#include "specula/kernels/attention_kernels.h"
#include "specula/kernels/isa.h"

namespace specula {
namespace {

TEST(SoftmaxExp, WithinTwoUlpOfTheExactExponential) {
  double worst = 0.0;
  float worst_x = 0.0f;
  // Every 997th float in [-87, 0], and the ends.
  const auto lo = std::bit_cast<uint32_t>(-87.0f);
  for (uint32_t b = 0x80000000u; b <= lo; b += 997) {
    const float x = std::bit_cast<float>(b);
    const double exact = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    const double err = std::abs(static_cast<double>(softmax_exp(x)) - exact) / ulp;
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  }
  EXPECT_LT(worst, 2.0) << "at x = " << worst_x;
  EXPECT_EQ(softmax_exp(0.0f), 1.0f);
  EXPECT_EQ(softmax_exp(-0.0f), 1.0f);
  EXPECT_GT(softmax_exp(kSoftmaxExpFloor), 0.0f);
  EXPECT_EQ(softmax_exp(std::nextafter(kSoftmaxExpFloor, -100.0f)), 0.0f);
  EXPECT_EQ(softmax_exp(-1e30f), 0.0f);
  EXPECT_EQ(softmax_exp(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(softmax_exp(NAN)));
}

TEST(SoftmaxExp, NumeratorsSumInSixteenPartialSums) {
  std::vector<float> s = {0.0f, -1.0f, -2.0f, 1.0f};
  const float total = softmax_numerators(s.data(), static_cast<int64_t>(s.size()));
  EXPECT_EQ(s[3], 1.0f);  // the maximum
  EXPECT_EQ(s[0], softmax_exp(-1.0f));
  EXPECT_EQ(s[2], softmax_exp(-3.0f));
  // Four keys: lanes 0..3, folded pairwise: (l0 + l2) + (l1 + l3).
  EXPECT_EQ(total, (s[0] + s[2]) + (s[1] + s[3]));
}

#if defined(SPECULA_X86)
TEST(SoftmaxExp, VectorNumeratorsAreThePortableBytes) {
  struct Kernel {
    Isa isa;
    float (*numerators)(float*, int64_t);
  };
  std::vector<Kernel> kernels;  // those this CPU runs
  if (detected_isa() >= Isa::Avx2) kernels.push_back({Isa::Avx2, detail::softmax_numerators_avx2});
  if (detected_isa() >= Isa::Avx512) kernels.push_back({Isa::Avx512, detail::softmax_numerators_avx512});
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  lengths.push_back(1000);
  lengths.push_back(4099);
  for (const Kernel& k : kernels) {
    for (const float spread : {1.0f, 30.0f, 200.0f}) {  // 200: many scores below the floor
      for (const int64_t n : lengths) {
        std::vector<float> a(static_cast<size_t>(n));
        for (float& x : a) x = nd(rng) * spread;
        std::vector<float> b = a;
        const float ta = softmax_numerators(a.data(), n);
        const float tb = k.numerators(b.data(), n);
        const auto where = testing::Message() << isa_name(k.isa) << ", " << n << " keys, spread " << spread;
        EXPECT_EQ(std::memcmp(&ta, &tb, sizeof(float)), 0) << where;
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << where;
      }
    }
  }
}
#endif

}  // namespace
}  // namespace specula
