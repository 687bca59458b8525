// The exact matmul treats dense weight formats alike: bf16 and f16 rows give the bytes of their
// (exact) f32 widening, on every kernel set. The drafter relies on it to score a dense
// embedding's candidate rows in their stored format instead of an f32 copy.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "random_weights.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/quant.h"

namespace specula {
namespace {

TEST(DenseFormats, StoredRowsScoreLikeTheirF32Widening) {
  std::mt19937 rng(9);
  ThreadPool pool(2);
  for (WeightFormat format : {WeightFormat::BF16, WeightFormat::F16}) {
    const int64_t n = 37, k = 264;  // k: a tail past the kernels' 32-wide steps
    const DType dt = format == WeightFormat::BF16 ? DType::BF16 : DType::F16;
    const test::RandomWeights stored = test::random_weights(format, 0, 0, dt, n, k, rng);
    std::vector<float> widened(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < n; ++r) dequantize_row(stored.w, r, widened.data() + r * k);
    WeightMatrix f32;
    f32.format = WeightFormat::F32;
    f32.rows = n;
    f32.cols = k;
    f32.data = widened.data();
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (isa > detected_isa()) continue;
      set_active_isa(isa);
      for (int64_t m : {1, 3}) {
        std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(m * k));
        for (float& v : x) v = uni(rng);
        std::vector<float> a(static_cast<size_t>(m * n)), b(a.size());
        matmul(x.data(), m, stored.w, a.data(), pool, Precision::Exact);
        matmul(x.data(), m, f32, b.data(), pool, Precision::Exact);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
            << (format == WeightFormat::BF16 ? "bf16" : "f16") << ", " << isa_name(isa) << ", m " << m;
      }
    }
    set_active_isa(detected_isa());
  }
}

}  // namespace
}  // namespace specula
