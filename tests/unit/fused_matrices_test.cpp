// Projections fused into one packed matrix (model/fused_matrices.h): the fused product's rows are
// bitwise the separate products' rows, and fuse_packed refuses parts that are not one layout.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "random_weights.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/model/fused_matrices.h"

namespace specula {
namespace {

TEST(FusedMatrices, FusedProductRowsAreTheSeparateProductsRows) {
  std::mt19937 rng(3);
  const int64_t k = 256;
  // q, k, v shaped parts (different row counts), 4-bit g64 bf16 as in the E4B checkpoints.
  std::vector<test::RandomWeights> parts;
  for (int64_t rows : {64, 32, 48})
    parts.push_back(test::random_weights(WeightFormat::Affine, 4, 64, DType::BF16, rows, k, rng));
  std::vector<WeightMatrix*> ptrs;
  for (auto& p : parts) ptrs.push_back(&p.w);
  ThreadPool pool(2);
  const PackedBuffer packed = pack_matrices(ptrs, pool);
  const std::optional<WeightMatrix> fused = fuse_packed({ptrs[0], ptrs[1], ptrs[2]});
  ASSERT_TRUE(fused.has_value());
  EXPECT_EQ(fused->rows, 64 + 32 + 48);
  if (!fast_matmul_supported(*fused)) GTEST_SKIP() << "no fast kernels (AVX2 or AVX-512 VNNI) on this CPU";
  for (int64_t m : {1, 4, 9}) {
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(m * k));
    for (float& v : x) v = uni(rng);
    std::vector<float> y(static_cast<size_t>(m * fused->rows));
    matmul(x.data(), m, *fused, y.data(), pool, Precision::Fast);
    int64_t col = 0;
    for (const WeightMatrix* w : ptrs) {
      std::vector<float> part(static_cast<size_t>(m * w->rows));
      matmul(x.data(), m, *w, part.data(), pool, Precision::Fast);
      for (int64_t r = 0; r < m; ++r)
        EXPECT_EQ(std::memcmp(part.data() + r * w->rows, y.data() + r * fused->rows + col, sizeof(float) * w->rows), 0)
            << "m " << m << " row " << r << " part at column " << col;
      col += w->rows;
    }
  }
}

TEST(FusedMatrices, RefusesPartsThatAreNotOneLayout) {
  std::mt19937 rng(4);
  auto make = [&](int64_t rows, int64_t cols, int bits, int gs) {
    return test::random_weights(WeightFormat::Affine, bits, gs, DType::BF16, rows, cols, rng);
  };
  ThreadPool pool(1);
  {  // not packed
    test::RandomWeights a = make(16, 128, 4, 64), b = make(16, 128, 4, 64);
    EXPECT_FALSE(fuse_packed({&a.w, &b.w}).has_value());
  }
  {  // packed, but not back to back (another matrix between them)
    test::RandomWeights a = make(16, 128, 4, 64), mid = make(16, 128, 4, 64), b = make(16, 128, 4, 64);
    std::vector<WeightMatrix*> ptrs = {&a.w, &mid.w, &b.w};
    const PackedBuffer buf = pack_matrices(ptrs, pool);
    EXPECT_FALSE(fuse_packed({&a.w, &b.w}).has_value());
    EXPECT_TRUE(fuse_packed({&a.w, &mid.w, &b.w}).has_value());
  }
  {  // a partial 16-row block, a different input width, bit width or group size
    for (auto [r2, c2, b2, g2] : {std::tuple{24, 128, 4, 64}, std::tuple{16, 256, 4, 64}, std::tuple{16, 128, 8, 64},
                                  std::tuple{16, 128, 4, 32}}) {
      test::RandomWeights a = make(r2 == 24 ? 24 : 16, 128, 4, 64), b = make(16, c2, b2, g2);
      std::vector<WeightMatrix*> ptrs = {&a.w, &b.w};
      const PackedBuffer buf = pack_matrices(ptrs, pool);
      EXPECT_FALSE(fuse_packed({&a.w, &b.w}).has_value()) << r2 << " " << c2 << " " << b2 << " " << g2;
    }
  }
}

}  // namespace
}  // namespace specula
