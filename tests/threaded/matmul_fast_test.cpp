// Fast-precision matmul (kernels/matmul.h, Precision::Fast and Int8): the kernels against the
// scalar reference of the fast math, the bitwise batch-invariance contract (any M, row position and
// thread count), the fallback to the exact kernels, and the accuracy of the fast math against
// exact f32.
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
#include "specula/kernels/quant.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

using test::IsaGuard;

struct Spec {
  WeightFormat format;
  int bits;
  int gs;
  DType sd;
  std::string name() const {
    if (format == WeightFormat::BF16) return "bf16";
    if (format == WeightFormat::F16) return "f16";
    if (format == WeightFormat::F32) return "f32";
    return "q" + std::to_string(bits) + "g" + std::to_string(gs) + "-" + std::string(dtype_name(sd));
  }
};

// The formats fast mode has kernels for, every group size and scale dtype.
std::vector<Spec> fast_formats() {
  std::vector<Spec> out = {{WeightFormat::BF16, 0, 0, DType::BF16}};
  for (int bits : {4, 8}) {
    for (int gs : {32, 64, 128}) {
      for (DType sd : {DType::BF16, DType::F16, DType::F32}) out.push_back({WeightFormat::Affine, bits, gs, sd});
    }
  }
  // Codes of 2, 3, 5 and 6 bits, widened to the 4- and 8-bit layouts when packed.
  for (int bits : {2, 3, 5, 6}) {
    for (int gs : {32, 64}) out.push_back({WeightFormat::Affine, bits, gs, bits % 2 == 0 ? DType::F32 : DType::BF16});
  }
  // Groups of 16 (GGUF Q6_K): codes of 5 to 8 bits.
  for (DType sd : {DType::BF16, DType::F16, DType::F32}) out.push_back({WeightFormat::Affine, 8, 16, sd});
  for (int bits : {5, 6}) out.push_back({WeightFormat::Affine, bits, 16, DType::F32});
  return out;
}

using Weights = test::RandomWeights;

constexpr Precision kLowPrecisions[] = {Precision::Fast, Precision::Int8};

Weights make_weights(const Spec& spec, int64_t rows, int64_t cols, std::mt19937& rng) {
  return test::random_weights(spec.format, spec.bits, spec.gs, spec.sd, rows, cols, rng);
}

// Activations with a spread of magnitudes per row (as hidden states have), one all-zero group.
std::vector<float> random_x(int64_t m, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(m * k);
  for (int64_t i = 0; i < m; ++i) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4);
    for (int64_t j = 0; j < k; ++j) x[i * k + j] = row_scale * uni(rng);
  }
  if (m > 1 && k >= 32) std::fill(x.begin() + k, x.begin() + k + 32, 0.0f);
  return x;
}

float load(const std::vector<uint8_t>& v, DType t, int64_t i) {
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, v.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, v.data() + 2 * i, 2);
  return t == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Sum over k of |x| (|q s| + |b|) for affine weights, of |x w| for dense ones: the scale of the
// kernels' f32 rounding error.
std::vector<double> magnitude(const std::vector<float>& x, int64_t m, const Weights& wt) {
  const WeightMatrix& w = wt.w;
  std::vector<double> out(m * w.rows, 0.0);
  std::vector<float> row(w.cols);
  std::vector<double> mag(w.cols);
  for (int64_t n = 0; n < w.rows; ++n) {
    if (w.format == WeightFormat::Affine) {
      const auto* words = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w.data) + n * w.row_bytes());
      for (int64_t j = 0; j < w.cols; ++j) {
        const int64_t g = n * w.groups_per_row() + j / w.group_size;
        mag[j] = std::fabs(unpack_code(words, w.bits, j) * double(load(wt.scales, w.scale_dtype, g))) +
                 std::fabs(load(wt.biases, w.scale_dtype, g));
      }
    } else {
      dequantize_row(w, n, row.data());
      for (int64_t j = 0; j < w.cols; ++j) mag[j] = std::fabs(row[j]);
    }
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t j = 0; j < w.cols; ++j) s += std::fabs(x[i * w.cols + j]) * mag[j];
      out[i * w.rows + n] = s + 1e-30;
    }
  }
  return out;
}

TEST(MatmulFast, SupportFollowsFormatAndCpu) {
  IsaGuard guard;
  std::mt19937 rng(3);
  const CpuFeatures& f = cpu_features();
  for (const Spec& spec :
       {Spec{WeightFormat::Affine, 4, 64, DType::BF16}, Spec{WeightFormat::Affine, 8, 32, DType::F16},
        Spec{WeightFormat::Affine, 3, 64, DType::BF16}, Spec{WeightFormat::BF16, 0, 0, DType::BF16},
        Spec{WeightFormat::F16, 0, 0, DType::F16}, Spec{WeightFormat::F32, 0, 0, DType::F32}}) {
    const Weights wt = make_weights(spec, 4, 128, rng);
    // Affine, every width: the VNNI kernel or, under the AVX2 kernel set (and without VNNI), the
    // AVX2 kernel with the same bytes; bf16: only with AVX-512 BF16.
    const bool affine = spec.format == WeightFormat::Affine;
    set_active_isa(detected_isa());
    bool want = affine && detected_isa() >= Isa::Avx2;
    if (detected_isa() == Isa::Avx512 && spec.format == WeightFormat::BF16) want = f.avx512bf16;
    EXPECT_EQ(fast_matmul_supported(wt.w), want) << spec.name();
    if (detected_isa() >= Isa::Avx2) {
      set_active_isa(Isa::Avx2);
      EXPECT_EQ(fast_matmul_supported(wt.w), affine) << spec.name();
    }
    set_active_isa(Isa::Scalar);
    EXPECT_FALSE(fast_matmul_supported(wt.w)) << spec.name();
  }
  EXPECT_EQ(parse_precision("fast"), Precision::Fast);
  EXPECT_EQ(parse_precision("exact"), Precision::Exact);
  EXPECT_EQ(parse_precision("int8"), Precision::Int8);
  EXPECT_STREQ(precision_name(Precision::Fast), "fast");
  EXPECT_STREQ(precision_name(Precision::Int8), "int8");
  EXPECT_THROW(parse_precision("int4"), Error);
  EXPECT_THROW(parse_precision("Fast"), Error);
}

// Groups of 16 come only from GGUF Q6_K: with codes of 5 to 8 bits the fast kernels of the CPU run
// them (AVX-512 VNNI or AVX2); 4-bit groups of 16 have no fast kernel and run the exact one.
TEST(MatmulFast, GroupsOf16RunTheFastKernels) {
  IsaGuard guard;
  std::mt19937 rng(4);
  const Weights q8 = make_weights({WeightFormat::Affine, 8, 16, DType::F32}, 4, 128, rng);
  const Weights q6 = make_weights({WeightFormat::Affine, 6, 16, DType::F32}, 4, 128, rng);
  const Weights q4 = make_weights({WeightFormat::Affine, 4, 16, DType::F32}, 4, 128, rng);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa > detected_isa()) continue;
    set_active_isa(isa);
    EXPECT_EQ(fast_matmul_supported(q8.w), isa >= Isa::Avx2) << isa_name(isa);
    EXPECT_EQ(fast_matmul_supported(q6.w), isa >= Isa::Avx2) << isa_name(isa);
    EXPECT_EQ(fast_kernel_name(q8.w, Precision::Fast) != nullptr ? std::string(fast_kernel_name(q8.w, Precision::Fast))
                                                                 : std::string("none"),
              isa == Isa::Avx512 && cpu_features().avx512vnni ? "avx512 vnni"
              : isa >= Isa::Avx2                              ? "avx2 int16"
                                                              : "none")
        << isa_name(isa);
    EXPECT_FALSE(fast_matmul_supported(q4.w)) << isa_name(isa);
  }
}

// Every format, shapes whose K leaves a partial 64-byte block (4-bit K = 96, 160; bf16 K = 40).
TEST(MatmulFast, KernelsAgreeWithFastReference) {
  IsaGuard guard;
  set_active_isa(detected_isa());
  ThreadPool one(1), two(2);
  std::mt19937 rng(77);
  const int64_t n = 29;
  for (const Precision precision : kLowPrecisions) {
    for (const Spec& spec : fast_formats()) {
      for (int64_t k : {128, 384, 160, 96, 40}) {
        if (spec.format == WeightFormat::Affine && k % spec.gs != 0) continue;
        const Weights wt = make_weights(spec, n, k, rng);
        if (!fast_matmul_supported(wt.w)) continue;  // covered by FallsBackToExactKernels
        const int64_t m = 11;
        const std::vector<float> x = random_x(m, k, rng);
        std::vector<float> ref(m * n), y(m * n, NAN);
        reference::matmul_fast(x.data(), m, k, wt.w, ref.data(), n, precision);
        matmul(x.data(), m, wt.w, y.data(), k == 128 ? two : one, precision);
        const std::vector<double> mag = magnitude(x, m, wt);
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_LE(std::fabs(double(y[i]) - ref[i]), 1e-5 * mag[i])
              << precision_name(precision) << " " << spec.name() << " K=" << k << " element " << i << " got " << y[i]
              << " want " << ref[i];
        }
      }
    }
  }
}

TEST(MatmulFast, RowsAreBitwiseBatchAndThreadInvariant) {
  IsaGuard guard;
  set_active_isa(detected_isa());
  ThreadPool one(1), two(2);
  std::mt19937 rng(2024);
  const int64_t n = 37, k = 256, rows = 64;
  for (const Precision precision : kLowPrecisions) {
    for (const Spec& spec : fast_formats()) {
      const Weights wt = make_weights(spec, n, k, rng);
      const std::vector<float> x = random_x(rows, k, rng);
      SCOPED_TRACE(spec.name() + " " + precision_name(precision));
      std::vector<float> full(rows * n);
      matmul(x.data(), rows, wt.w, full.data(), two, precision);
      std::vector<int> order(rows);
      std::iota(order.begin(), order.end(), 0);
      for (int64_t m = 1; m <= rows; ++m) {
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<float> xs(m * k), ys(m * n);
        for (int64_t i = 0; i < m; ++i) std::memcpy(&xs[i * k], &x[order[i] * k], k * sizeof(float));
        const bool two_threads = m == 1 || m == 4 || m == 9 || m == 33;
        matmul(xs.data(), m, wt.w, ys.data(), two_threads ? two : one, precision);
        for (int64_t i = 0; i < m; ++i) {
          ASSERT_EQ(0, std::memcmp(&ys[i * n], &full[order[i] * n], n * sizeof(float)))
              << "row " << order[i] << " at position " << i << " of M=" << m;
        }
      }
    }
  }
}

// A prefill-sized call (several W tiles, many X row blocks) gives each row the bytes of M = 1.
TEST(MatmulFast, PrefillRowsEqualDecodeRows) {
  IsaGuard guard;
  set_active_isa(detected_isa());
  ThreadPool two(2);
  std::mt19937 rng(8);
  const int64_t n = 150, k = 512, m = 40;
  for (const Spec& spec :
       {Spec{WeightFormat::Affine, 4, 64, DType::BF16}, Spec{WeightFormat::BF16, 0, 0, DType::BF16}}) {
    const Weights wt = make_weights(spec, n, k, rng);
    const std::vector<float> x = random_x(m, k, rng);
    for (const Precision precision : kLowPrecisions) {
      std::vector<float> all(m * n), one_row(n);
      matmul(x.data(), m, wt.w, all.data(), two, precision);
      for (int64_t i = 0; i < m; ++i) {
        matmul(x.data() + i * k, 1, wt.w, one_row.data(), two, precision);
        ASSERT_EQ(0, std::memcmp(one_row.data(), &all[i * n], n * sizeof(float)))
            << spec.name() << " " << precision_name(precision) << " row " << i;
      }
    }
  }
}

// Formats without a fast kernel, and every format under a kernel set without the instructions,
// give the exact kernel's bytes.
TEST(MatmulFast, FallsBackToExactKernels) {
  IsaGuard guard;
  ThreadPool pool(2);
  std::mt19937 rng(15);
  const int64_t m = 5, n = 19, k = 128;
  std::vector<Spec> specs = fast_formats();
  specs.push_back({WeightFormat::Affine, 4, 16, DType::BF16});
  specs.push_back({WeightFormat::F16, 0, 0, DType::F16});
  specs.push_back({WeightFormat::F32, 0, 0, DType::F32});
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa > detected_isa()) continue;
    set_active_isa(isa);
    for (const Spec& spec : specs) {
      const Weights wt = make_weights(spec, n, k, rng);
      if (fast_matmul_supported(wt.w)) continue;
      const std::vector<float> x = random_x(m, k, rng);
      std::vector<float> exact(m * n), fast(m * n);
      matmul(x.data(), m, wt.w, exact.data(), pool, Precision::Exact);
      for (const Precision precision : kLowPrecisions) {
        matmul(x.data(), m, wt.w, fast.data(), pool, precision);
        EXPECT_EQ(0, std::memcmp(exact.data(), fast.data(), exact.size() * sizeof(float)))
            << spec.name() << " " << precision_name(precision) << " isa=" << isa_name(isa);
      }
    }
  }
}

// The accuracy the fast math gives up: int16 activations (15 bits of the group's largest
// magnitude) and bf16 hi + lo terms stay within 1e-4 of the f32 result's magnitude scale, and the
// fast reference is not the exact math in disguise. Int8 activations (7 bits) stay within 1e-2
// and lose more than int16 on every quantized format.
TEST(MatmulFast, CloseToExactMath) {
  IsaGuard guard;
  set_active_isa(detected_isa());
  ThreadPool pool(1);
  std::mt19937 rng(31);
  const int64_t m = 3, n = 23, k = 512;
  for (const Spec& spec : fast_formats()) {
    const Weights wt = make_weights(spec, n, k, rng);
    const std::vector<float> x = random_x(m, k, rng);
    std::vector<float> exact(m * n), fast(m * n), int8(m * n);
    reference::matmul(x.data(), m, k, wt.w, exact.data(), n);
    reference::matmul_fast(x.data(), m, k, wt.w, fast.data(), n);
    reference::matmul_fast(x.data(), m, k, wt.w, int8.data(), n, Precision::Int8);
    const std::vector<double> mag = magnitude(x, m, wt);
    double worst = 0, worst8 = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      worst = std::max(worst, std::fabs(double(fast[i]) - exact[i]) / mag[i]);
      worst8 = std::max(worst8, std::fabs(double(int8[i]) - exact[i]) / mag[i]);
    }
    EXPECT_LT(worst, 1e-4) << spec.name();
    EXPECT_GT(worst, 0.0) << spec.name() << ": the fast reference should not be the exact math";
    EXPECT_LT(worst8, 1e-2) << spec.name();
    if (spec.format == WeightFormat::Affine) {
      EXPECT_GT(worst8, 10 * worst) << spec.name() << ": int8 is not int16";
    }
  }
}

// Fast and int8 multiply the dequantized weights by the quantized activations (per group x ~ s q):
// a group's bias multiplies s times the sum of its codes, not the sum of x, so the activations'
// rounding error is weighted by the weights themselves rather than by the unsigned codes (whose
// mean is half their range). Summing x instead misses this by ~1e-4 of the magnitude in int8.
TEST(MatmulFast, IsTheDequantizedWeightsTimesTheQuantizedActivations) {
  IsaGuard guard;
  set_active_isa(detected_isa());
  ThreadPool pool(1);
  std::mt19937 rng(43);
  const int64_t m = 3, n = 23, k = 512;
  for (const Precision precision : kLowPrecisions) {
    const float levels = precision == Precision::Int8 ? 127.0f : 32767.0f;
    for (const Spec& spec : fast_formats()) {
      if (spec.format != WeightFormat::Affine) continue;
      const Weights wt = make_weights(spec, n, k, rng);
      if (!fast_matmul_supported(wt.w)) continue;
      const WeightMatrix& w = wt.w;
      const std::vector<float> x = random_x(m, k, rng);
      std::vector<double> xq(x.size());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t g0 = 0; g0 < k; g0 += w.group_size) {
          const float* xg = x.data() + i * k + g0;
          float amax = 0.0f;
          for (int j = 0; j < w.group_size; ++j) amax = std::max(amax, std::fabs(xg[j]));
          const float inv = amax > 0.0f ? levels / amax : 0.0f;
          for (int j = 0; j < w.group_size; ++j)
            xq[i * k + g0 + j] = double(amax / levels) * std::nearbyint(xg[j] * inv);
        }
      }
      std::vector<float> y(m * n);
      matmul(x.data(), m, w, y.data(), pool, precision);
      const std::vector<double> mag = magnitude(x, m, wt);
      for (int64_t r = 0; r < n; ++r) {
        const auto* words = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w.data) + r * w.row_bytes());
        for (int64_t i = 0; i < m; ++i) {
          double want = 0.0;
          for (int64_t j = 0; j < k; ++j) {
            const int64_t g = r * w.groups_per_row() + j / w.group_size;
            const double wj = unpack_code(words, w.bits, j) * double(load(wt.scales, w.scale_dtype, g)) +
                              load(wt.biases, w.scale_dtype, g);
            want += wj * xq[i * k + j];
          }
          ASSERT_LE(std::fabs(y[i * n + r] - want), 1e-5 * mag[i * n + r])
              << precision_name(precision) << " " << spec.name() << " row " << i << " col " << r;
        }
      }
    }
  }
}

TEST(MatmulFast, HonoursRowStrides) {
  IsaGuard guard;
  set_active_isa(detected_isa());
  ThreadPool pool(2);
  std::mt19937 rng(6);
  const int64_t m = 9, n = 21, k = 256, ldx = 300, ldy = 30;
  for (const Spec& spec :
       {Spec{WeightFormat::Affine, 4, 32, DType::BF16}, Spec{WeightFormat::Affine, 8, 128, DType::F32},
        Spec{WeightFormat::BF16, 0, 0, DType::BF16}}) {
    const Weights wt = make_weights(spec, n, k, rng);
    const std::vector<float> packed = random_x(m, k, rng);
    std::vector<float> strided(m * ldx, NAN);
    for (int64_t i = 0; i < m; ++i) std::memcpy(&strided[i * ldx], &packed[i * k], k * sizeof(float));
    for (const Precision precision : kLowPrecisions) {
      std::vector<float> y0(m * n), y1(m * ldy, -7.0f);
      matmul(packed.data(), m, wt.w, y0.data(), pool, precision);
      matmul(strided.data(), m, ldx, wt.w, y1.data(), ldy, pool, precision);
      for (int64_t i = 0; i < m; ++i) {
        EXPECT_EQ(0, std::memcmp(&y0[i * n], &y1[i * ldy], n * sizeof(float))) << spec.name();
        for (int64_t j = n; j < ldy; ++j) EXPECT_EQ(y1[i * ldy + j], -7.0f);
      }
    }
  }
}

}  // namespace
}  // namespace specula
