// The AVX2 fast kernel (kernels/matmul_fast_avx2.cpp) for affine 4/8-bit weights: bitwise equal to
// a scalar model of the AVX-512 VNNI kernel's operations (so to that kernel, which is held to the
// same model where the CPU has it), bitwise batch invariant over M, row position and threads,
// and within fast mode's accuracy of the exact float64 product. Runs wherever AVX2 is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "isa_guard.h"
#include "random_weights.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/matmul_kernels.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/quant.h"
#include "specula/util/half.h"

namespace specula {
namespace {

using test::IsaGuard;

// Runs the AVX2 fast kernel (skips where the CPU has no AVX2).
bool use_avx2() {
  if (detected_isa() < Isa::Avx2) return false;
  set_active_isa(Isa::Avx2);
  return true;
}

struct Case {
  int bits;
  int gs;
  DType sd;
  std::string name() const {
    return "q" + std::to_string(bits) + "g" + std::to_string(gs) + "-" + std::string(dtype_name(sd));
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int bits : {4, 8})
    for (int gs : {32, 64, 128})
      for (DType sd : {DType::BF16, DType::F16, DType::F32}) out.push_back({bits, gs, sd});
  for (DType sd : {DType::BF16, DType::F16, DType::F32}) out.push_back({8, 16, sd});  // GGUF Q6_K
  // Narrower codes, widened to the 4- or 8-bit layout when packed.
  for (const Case& c : {Case{2, 32, DType::F16}, Case{3, 64, DType::BF16}, Case{5, 32, DType::F32},
                        Case{6, 64, DType::F16}, Case{5, 16, DType::F32}, Case{6, 16, DType::F32}})
    out.push_back(c);
  return out;
}

constexpr Precision kLow[] = {Precision::Fast, Precision::Int8};

// Activations with a spread of magnitudes per row, one all-zero group and one group of a single
// large value (the quantization's extremes; K >= 128).
std::vector<float> random_x_with_extremes(int64_t m, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(rng() % 13) - 6);
    for (int64_t j = 0; j < k; ++j) x[i * k + j] = row_scale * uni(rng);
  }
  if (m > 1 && k >= 32) std::fill(x.begin() + k, x.begin() + k + 32, 0.0f);
  if (m > 2 && k >= 128) {  // alone in its group for every group size
    std::fill(x.begin() + 2 * k, x.begin() + 2 * k + 128, 0.0f);
    x[2 * k + 8] = -300.0f;
  }
  return x;
}

float param(const test::RandomWeights& wt, const std::vector<uint8_t>& v, int64_t i) {
  const DType t = wt.w.scale_dtype;
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, v.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, v.data() + 2 * i, 2);
  return t == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// `vmaxps a, b`: a when a > b, else b.
float maxps(float a, float b) { return a > b ? a : b; }

// The AVX-512 kernel's operations, lane by lane, in scalar code: per group the 16-lane running
// max |x| and GCC's _mm512_reduce_max_ps tree, the quantization (nearest even, saturated), the
// scale times the group's integer sum of codes, the exact integer dot product per group and W row,
// and per group acc = fma(float(isum), scale * s_x, acc), acc = fma(bias, s_x * sum(q), acc).
std::vector<float> model(const std::vector<float>& x, int64_t m, const test::RandomWeights& wt, Precision precision) {
  const WeightMatrix& w = wt.w;
  const int64_t k = w.cols, groups = w.groups_per_row();
  const int gs = w.group_size;
  const bool int8 = precision == Precision::Int8;
  const float levels = int8 ? detail::kActivationLevels8 : detail::kActivationLevels;
  const float qmax = int8 ? 127.0f : 32767.0f;
  std::vector<float> y(static_cast<size_t>(m * w.rows));
  std::vector<int32_t> xq(static_cast<size_t>(k));
  std::vector<float> xscale(static_cast<size_t>(groups)), xsum(static_cast<size_t>(groups));
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x.data() + i * k;
    for (int64_t g = 0; g < groups; ++g) {
      float lmax[16] = {};
      for (int j = 0; j < gs; j += 16) {
        for (int l = 0; l < 16; ++l) lmax[l] = maxps(lmax[l], std::fabs(xi[g * gs + j + l]));
      }
      float m3[8], m6[4];
      for (int l = 0; l < 8; ++l) m3[l] = maxps(lmax[8 + l], lmax[l]);
      for (int l = 0; l < 4; ++l) m6[l] = maxps(m3[4 + l], m3[l]);
      const float m8[2] = {maxps(m6[0], m6[2]), maxps(m6[1], m6[3])};
      const float amax = maxps(m8[0], m8[1]);
      const float inv = amax > 0.0f ? levels / amax : 0.0f;
      xscale[g] = amax / levels;
      int32_t code_sum = 0;
      for (int j = 0; j < gs; ++j) {
        const float q = std::nearbyint(xi[g * gs + j] * inv);
        xq[g * gs + j] = static_cast<int32_t>(std::clamp(q, -qmax - 1.0f, qmax));
        code_sum += xq[g * gs + j];
      }
      xsum[g] = xscale[g] * static_cast<float>(code_sum);
    }
    for (int64_t n = 0; n < w.rows; ++n) {
      const auto* words = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w.data) + n * w.row_bytes());
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int64_t isum = 0;
        for (int64_t j = g * gs; j < (g + 1) * gs; ++j) isum += int64_t{unpack_code(words, w.bits, j)} * xq[j];
        const float d = param(wt, wt.scales, n * groups + g) * xscale[g];
        acc = std::fma(static_cast<float>(static_cast<int32_t>(isum)), d, acc);
        acc = std::fma(param(wt, wt.biases, n * groups + g), xsum[g], acc);
      }
      y[i * w.rows + n] = acc;
    }
  }
  return y;
}

// The exact product in float64 (weights dequantized exactly), and per element the scale of the
// kernels' f32 rounding error: the sum over k of |x| (|q s| + |b|), as tests/threaded/matmul_fast_test.cpp.
std::vector<double> exact(const std::vector<float>& x, int64_t m, const test::RandomWeights& wt,
                          std::vector<double>* magnitude) {
  const WeightMatrix& w = wt.w;
  const int64_t k = w.cols, groups = w.groups_per_row();
  std::vector<double> y(static_cast<size_t>(m * w.rows)), row(static_cast<size_t>(k)), mag(static_cast<size_t>(k));
  magnitude->assign(y.size(), 0.0);
  for (int64_t n = 0; n < w.rows; ++n) {
    const auto* words = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w.data) + n * w.row_bytes());
    for (int64_t j = 0; j < k; ++j) {
      const int64_t g = n * groups + j / w.group_size;
      const double qs = unpack_code(words, w.bits, j) * double(param(wt, wt.scales, g));
      row[j] = qs + param(wt, wt.biases, g);
      mag[j] = std::fabs(qs) + std::fabs(param(wt, wt.biases, g));
    }
    for (int64_t i = 0; i < m; ++i) {
      double s = 0, scale = 0;
      for (int64_t j = 0; j < k; ++j) {
        s += double(x[i * k + j]) * row[j];
        scale += std::fabs(double(x[i * k + j])) * mag[j];
      }
      y[i * w.rows + n] = s;
      (*magnitude)[i * w.rows + n] = scale + 1e-30;
    }
  }
  return y;
}

test::RandomWeights weights(const Case& c, int64_t n, int64_t k, std::mt19937& rng) {
  return test::random_weights(WeightFormat::Affine, c.bits, c.gs, c.sd, n, k, rng);
}

TEST(MatmulFastAvx2, DispatchAndNames) {
  IsaGuard guard;
  if (!use_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(1);
  const auto q4 = weights({4, 64, DType::BF16}, 16, 128, rng);
  const auto q3 = test::random_weights(WeightFormat::Affine, 3, 64, DType::BF16, 16, 128, rng);
  const auto q4g16 = test::random_weights(WeightFormat::Affine, 4, 16, DType::BF16, 16, 128, rng);
  const auto bf16 = test::random_weights(WeightFormat::BF16, 0, 0, DType::BF16, 16, 128, rng);
  EXPECT_TRUE(fast_matmul_supported(q4.w));
  EXPECT_TRUE(fast_matmul_supported(q3.w));  // widened to 4-bit codes
  EXPECT_FALSE(fast_matmul_supported(q4g16.w));
  EXPECT_STREQ(fast_kernel_name(q3.w, Precision::Int8), "avx2 int8");
  EXPECT_FALSE(fast_matmul_supported(bf16.w));
  EXPECT_STREQ(fast_kernel_name(q4.w, Precision::Fast), "avx2 int16");
  EXPECT_STREQ(fast_kernel_name(q4.w, Precision::Int8), "avx2 int8");
  const auto q8 = weights({8, 32, DType::F16}, 16, 128, rng);
  EXPECT_STREQ(fast_kernel_name(q8.w, Precision::Int8), "avx2 int16 (int8 levels)");
  EXPECT_EQ(fast_kernel_name(q4.w, Precision::Exact), nullptr);
  EXPECT_EQ(fast_kernel_name(bf16.w, Precision::Fast), nullptr);
  EXPECT_EQ(fast_kernels_summary(Precision::Fast), "fast: avx2 int16 for 2-8-bit, fast→exact fallback for bf16");
  EXPECT_EQ(fast_kernels_summary(Precision::Int8),
            "int8: avx2 int8 for 2-4-bit, avx2 int16 (int8 levels) for 5-8-bit, fast→exact fallback for bf16");
  EXPECT_EQ(fast_kernels_summary(Precision::Exact), "");
  set_active_isa(Isa::Scalar);
  EXPECT_FALSE(fast_matmul_supported(q4.w));
}

// Every bit width, group size and scale dtype; N off the 16-row block, K of one group and of
// several (96: not a multiple of 64 or 128); every row count of one kernel call and beyond.
TEST(MatmulFastAvx2, BitwiseEqualToTheAvx512Model) {
  IsaGuard guard;
  if (!use_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  ThreadPool two(2);
  std::mt19937 rng(404);
  for (const Case& c : cases()) {
    for (int64_t k : {int64_t{c.gs}, int64_t{96}, int64_t{384}}) {
      if (k % c.gs != 0 || k * c.bits % 32 != 0) continue;
      const int64_t n = k == 96 ? 37 : 21, m = 9;
      const auto wt = weights(c, n, k, rng);
      const std::vector<float> x = random_x_with_extremes(m, k, rng);
      for (const Precision p : kLow) {
        const std::vector<float> want = model(x, m, wt, p);
        std::vector<float> y(want.size(), NAN);
        matmul(x.data(), m, wt.w, y.data(), two, p);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_EQ(std::memcmp(&y[i], &want[i], sizeof(float)), 0)
              << c.name() << " " << precision_name(p) << " K=" << k << " element " << i << " got " << y[i] << " want "
              << want[i];
        }
      }
    }
  }
}

// Where the CPU has AVX-512 VNNI, that kernel gives the same bytes as the model (and so as AVX2).
TEST(MatmulFastAvx2, Avx512KernelMatchesTheModel) {
  IsaGuard guard;
  if (detected_isa() != Isa::Avx512 || !cpu_features().avx512vnni) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  set_active_isa(Isa::Avx512);
  ThreadPool two(2);
  std::mt19937 rng(405);
  for (const Case& c : cases()) {
    const int64_t n = 37, k = 384, m = 11;
    const auto wt = weights(c, n, k, rng);
    const std::vector<float> x = random_x_with_extremes(m, k, rng);
    for (const Precision p : kLow) {
      const std::vector<float> want = model(x, m, wt, p);
      std::vector<float> y(want.size(), NAN);
      matmul(x.data(), m, wt.w, y.data(), two, p);
      EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
          << c.name() << " " << precision_name(p);
    }
  }
}

// Row r's bytes do not depend on M (1..17), its position among the rows or the thread count
// (1, 2, 3), for pre-packed and per-call-packed weights alike.
TEST(MatmulFastAvx2, RowsAreBitwiseBatchAndThreadInvariant) {
  IsaGuard guard;
  if (!use_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  ThreadPool one(1), two(2), three(3);
  ThreadPool* pools[] = {&one, &two, &three};
  std::mt19937 rng(2025);
  const int64_t rows = 17;
  for (const Case& c : {Case{4, 32, DType::BF16}, Case{4, 64, DType::F16}, Case{4, 128, DType::BF16},
                        Case{8, 32, DType::F32}, Case{8, 64, DType::BF16}, Case{8, 128, DType::F16}}) {
    const int64_t n = 53, k = 640;
    auto wt = weights(c, n, k, rng);
    std::vector<WeightMatrix*> list = {&wt.w};
    const PackedBuffer packed = pack_matrices(list, two);
    const std::vector<float> x = random_x_with_extremes(rows, k, rng);
    for (const Precision p : kLow) {
      SCOPED_TRACE(c.name() + " " + precision_name(p));
      std::vector<float> full(rows * n);
      matmul(x.data(), rows, wt.w, full.data(), one, p);
      std::vector<int> order(rows);
      std::iota(order.begin(), order.end(), 0);
      for (int64_t m = 1; m <= rows; ++m) {
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<float> xs(m * k), ys(m * n);
        for (int64_t i = 0; i < m; ++i) std::memcpy(&xs[i * k], &x[order[i] * k], k * sizeof(float));
        ThreadPool& pool = *pools[m % 3];
        WeightMatrix w = wt.w;
        if (m % 2 == 0) w.packed = nullptr;  // packed per call: the same bytes
        matmul(xs.data(), m, w, ys.data(), pool, p);
        for (int64_t i = 0; i < m; ++i) {
          ASSERT_EQ(0, std::memcmp(&ys[i * n], &full[order[i] * n], n * sizeof(float)))
              << "row " << order[i] << " at position " << i << " of M=" << m << ", " << pool.size() << " thread(s)";
        }
      }
    }
  }
}

// A prefill-sized call whose rows do not fit one L2 pass (K = 8192: 32 rows a pass of int16
// activations, 64 of int8 ones) gives every row the bytes of M = 1.
TEST(MatmulFastAvx2, PrefillPassesEqualDecodeRows) {
  IsaGuard guard;
  if (!use_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  ThreadPool two(2);
  std::mt19937 rng(9);
  const int64_t n = 20, k = 8192, m = 70;
  const auto wt = weights({4, 64, DType::BF16}, n, k, rng);
  const std::vector<float> x = random_x_with_extremes(m, k, rng);
  for (const Precision p : kLow) {
    std::vector<float> all(m * n), one_row(n);
    matmul(x.data(), m, wt.w, all.data(), two, p);
    for (int64_t i = 0; i < m; ++i) {
      matmul(x.data() + i * k, 1, wt.w, one_row.data(), two, p);
      ASSERT_EQ(0, std::memcmp(one_row.data(), &all[i * n], n * sizeof(float))) << precision_name(p) << " row " << i;
    }
  }
}

// Within fast mode's bar of the exact float64 product (1e-4 of the error scale; int8 levels:
// 1e-2), and not the exact math in disguise.
TEST(MatmulFastAvx2, CloseToExactProduct) {
  IsaGuard guard;
  if (!use_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  ThreadPool pool(2);
  std::mt19937 rng(31);
  const int64_t m = 5, n = 29, k = 768;
  for (const Case& c : cases()) {
    const auto wt = weights(c, n, k, rng);
    const std::vector<float> x = random_x_with_extremes(m, k, rng);
    std::vector<double> mag;
    const std::vector<double> want = exact(x, m, wt, &mag);
    for (const Precision p : kLow) {
      std::vector<float> y(m * n), ref(m * n);
      matmul(x.data(), m, wt.w, y.data(), pool, p);
      reference::matmul_fast(x.data(), m, k, wt.w, ref.data(), n, p);
      double worst = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        worst = std::max(worst, std::fabs(y[i] - want[i]) / mag[i]);
        ASSERT_LE(std::fabs(double(y[i]) - ref[i]), 1e-5 * mag[i]) << c.name() << " " << precision_name(p) << " " << i;
      }
      EXPECT_LT(worst, p == Precision::Int8 ? 1e-2 : 1e-4) << c.name() << " " << precision_name(p);
      EXPECT_GT(worst, 0.0) << c.name() << " " << precision_name(p);
    }
  }
}

}  // namespace
}  // namespace specula
