// matmul: every kernel set this CPU has vs the scalar reference, the bitwise batch-invariance
// contract (docs/architecture.md §3), argument checks, and the WeightMatrix views the kernels
// consume.
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

std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa <= detected_isa()) out.push_back(isa);
  }
  return out;
}

// A weight matrix with owned storage, and the name of its format.
struct NamedWeights : test::RandomWeights {
  WeightFormat format = WeightFormat::F32;
  int bits = 0, gs = 0;
  DType sd = DType::BF16;
  std::string name() const {
    switch (format) {
      case WeightFormat::F32: return "f32";
      case WeightFormat::BF16: return "bf16";
      case WeightFormat::F16: return "f16";
      case WeightFormat::Affine: break;
    }
    return "q" + std::to_string(bits) + "g" + std::to_string(gs) + "-" + std::string(dtype_name(sd));
  }
};

struct FormatSpec {
  WeightFormat format;
  int bits;
  int gs;
  DType sd;
};

std::vector<FormatSpec> all_formats() {
  std::vector<FormatSpec> out = {{WeightFormat::F32, 0, 0, DType::F32},
                                 {WeightFormat::BF16, 0, 0, DType::BF16},
                                 {WeightFormat::F16, 0, 0, DType::F16}};
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int gs : {16, 32, 64, 128}) {
      for (DType sd : {DType::BF16, DType::F16, DType::F32}) out.push_back({WeightFormat::Affine, bits, gs, sd});
    }
  }
  return out;
}

NamedWeights make_named_weights(const FormatSpec& spec, int64_t rows, int64_t cols, std::mt19937& rng) {
  NamedWeights r;
  r.format = spec.format;
  r.bits = spec.bits;
  r.gs = spec.gs;
  r.sd = spec.sd;
  static_cast<test::RandomWeights&>(r) =
      test::random_weights(spec.format, spec.bits, spec.gs, spec.sd, rows, cols, rng);
  return r;
}

// Magnitude against which a kernel's rounding is judged: sum over k of |x| (|q*s| + |b|) for
// affine weights (the kernels sum q*s and b separately), sum |x w| for dense ones.
std::vector<double> error_scale(const std::vector<float>& x, int64_t m, const NamedWeights& wt) {
  const WeightMatrix& w = wt.w;
  std::vector<double> out(m * w.rows, 0.0);
  std::vector<float> row(w.cols);
  for (int64_t n = 0; n < w.rows; ++n) {
    std::vector<double> mag(w.cols);
    if (w.format == WeightFormat::Affine) {
      const auto* words = reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w.data) + n * w.row_bytes());
      for (int64_t j = 0; j < w.cols; ++j) {
        const int64_t g = n * (w.cols / w.group_size) + j / w.group_size;
        auto widen = [&](const std::vector<uint8_t>& v) {
          if (w.scale_dtype == DType::F32) {
            float f;
            std::memcpy(&f, v.data() + 4 * g, 4);
            return f;
          }
          uint16_t h;
          std::memcpy(&h, v.data() + 2 * g, 2);
          return w.scale_dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
        };
        const double q = unpack_code(words, w.bits, j);
        mag[j] = std::fabs(q * widen(wt.scales)) + std::fabs(widen(wt.biases));
      }
    } else {
      dequantize_row(w, n, row.data());
      for (int64_t j = 0; j < w.cols; ++j) mag[j] = std::fabs(row[j]);
    }
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t j = 0; j < w.cols; ++j) s += std::fabs(x[i * w.cols + j]) * mag[j];
      out[i * w.rows + n] = s;
    }
  }
  return out;
}

TEST(Matmul, EveryKernelSetAgreesWithReference) {
  IsaGuard guard;
  ThreadPool one(1), two(2);
  std::mt19937 rng(1234);
  const int64_t n = 37, max_m = 64;
  for (const FormatSpec& spec : all_formats()) {
    for (int64_t k : {64, 192, 384}) {
      if (spec.format == WeightFormat::Affine && k % spec.gs != 0) continue;
      const NamedWeights wt = make_named_weights(spec, n, k, rng);
      const std::vector<float> x = test::random_activations(max_m, k, rng);
      std::vector<float> ref(max_m * n);
      reference::matmul(x.data(), max_m, k, wt.w, ref.data(), n);
      const std::vector<double> scale = error_scale(x, max_m, wt);
      for (Isa isa : available_isas()) {
        set_active_isa(isa);
        for (int64_t m : {1, 3, 8, 13, 64}) {
          SCOPED_TRACE(wt.name() + " K=" + std::to_string(k) + " M=" + std::to_string(m) +
                       " isa=" + std::string(isa_name(isa)));
          std::vector<float> y(m * n, NAN);
          matmul(x.data(), m, wt.w, y.data(), m == 13 ? two : one);
          for (int64_t i = 0; i < m * n; ++i) {
            if (isa == Isa::Scalar) {
              // Same per-element order as the reference: bitwise equal.
              ASSERT_EQ(std::memcmp(&y[i], &ref[i], 4), 0) << "element " << i;
            } else {
              ASSERT_LE(std::fabs(double(y[i]) - ref[i]), 2e-6 * scale[i] + 1e-30)
                  << "element " << i << " got " << y[i] << " want " << ref[i];
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, RowsAreBitwiseBatchAndThreadInvariant) {
  IsaGuard guard;
  ThreadPool one(1), two(2);
  std::mt19937 rng(99);
  const int64_t n = 37, k = 128, rows = 64;
  for (const FormatSpec& spec : all_formats()) {
    const NamedWeights wt = make_named_weights(spec, n, k, rng);
    const std::vector<float> x = test::random_activations(rows, k, rng);
    for (Isa isa : available_isas()) {
      set_active_isa(isa);
      SCOPED_TRACE(wt.name() + " isa=" + std::string(isa_name(isa)));
      std::vector<float> full(rows * n);
      matmul(x.data(), rows, wt.w, full.data(), one);
      std::vector<int> order(rows);
      std::iota(order.begin(), order.end(), 0);
      for (int64_t m = 1; m <= rows; ++m) {
        // A random subset of the rows, in random order; a few batch sizes on 2 threads (each
        // 2-thread call costs a cross-core handoff, slow on a loaded machine).
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<float> xs(m * k), ys(m * n);
        for (int64_t i = 0; i < m; ++i) std::memcpy(&xs[i * k], &x[order[i] * k], k * sizeof(float));
        const bool two_threads = m == 1 || m == 6 || m == 13 || m == 64;
        matmul(xs.data(), m, wt.w, ys.data(), two_threads ? two : one);
        for (int64_t i = 0; i < m; ++i) {
          ASSERT_EQ(0, std::memcmp(&ys[i * n], &full[order[i] * n], n * sizeof(float)))
              << "row " << order[i] << " at position " << i << " of M=" << m;
        }
      }
    }
  }
}

TEST(Matmul, HonoursRowStrides) {
  IsaGuard guard;
  ThreadPool pool(2);
  std::mt19937 rng(5);
  const int64_t m = 5, n = 21, k = 128, ldx = 140, ldy = 30;
  for (const FormatSpec& spec :
       {FormatSpec{WeightFormat::BF16, 0, 0, DType::BF16}, FormatSpec{WeightFormat::Affine, 4, 64, DType::BF16},
        FormatSpec{WeightFormat::Affine, 3, 32, DType::F16}}) {
    const NamedWeights wt = make_named_weights(spec, n, k, rng);
    const std::vector<float> packed = test::random_activations(m, k, rng);
    std::vector<float> strided(m * ldx, NAN);
    for (int64_t i = 0; i < m; ++i) std::memcpy(&strided[i * ldx], &packed[i * k], k * sizeof(float));
    for (Isa isa : available_isas()) {
      set_active_isa(isa);
      std::vector<float> y0(m * n), y1(m * ldy, -7.0f);
      matmul(packed.data(), m, wt.w, y0.data(), pool);
      matmul(strided.data(), m, ldx, wt.w, y1.data(), ldy, pool);
      for (int64_t i = 0; i < m; ++i) {
        EXPECT_EQ(0, std::memcmp(&y0[i * n], &y1[i * ldy], n * sizeof(float))) << isa_name(isa);
        for (int64_t j = n; j < ldy; ++j) EXPECT_EQ(y1[i * ldy + j], -7.0f);  // padding untouched
      }
    }
  }
}

TEST(Matmul, RejectsInvalidArguments) {
  ThreadPool pool(1);
  std::mt19937 rng(1);
  NamedWeights wt = make_named_weights({WeightFormat::Affine, 4, 64, DType::BF16}, 4, 128, rng);
  std::vector<float> x(2 * 128), y(2 * 4);
  EXPECT_THROW(matmul(x.data(), 2, 100, wt.w, y.data(), 4, pool), Error);  // ldx < K
  EXPECT_THROW(matmul(x.data(), 2, 128, wt.w, y.data(), 3, pool), Error);  // ldy < N
  WeightMatrix bad = wt.w;
  bad.bits = 7;
  EXPECT_THROW(matmul(x.data(), 2, bad, y.data(), pool), Error);
  bad = wt.w;
  bad.group_size = 48;
  EXPECT_THROW(matmul(x.data(), 2, bad, y.data(), pool), Error);
  bad = wt.w;
  bad.scales = nullptr;
  EXPECT_THROW(matmul(x.data(), 2, bad, y.data(), pool), Error);
}

TEST(Isa, ParsesNamesAndClampsToTheCpu) {
  IsaGuard guard;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    Isa parsed;
    ASSERT_TRUE(parse_isa(isa_name(isa), &parsed));
    EXPECT_EQ(parsed, isa);
  }
  Isa unused;
  EXPECT_FALSE(parse_isa("sse9", &unused));
  set_active_isa(Isa::Avx512);
  EXPECT_EQ(active_isa(), detected_isa());
  set_active_isa(Isa::Scalar);
  EXPECT_EQ(active_isa(), Isa::Scalar);
  const CpuFeatures& f = cpu_features();
  if (detected_isa() == Isa::Avx512) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
  }
  if (detected_isa() >= Isa::Avx2) {
    EXPECT_TRUE(f.avx2 && f.fma && f.f16c);
  }
  EXPECT_FALSE(cpu_features_string().empty());
}

// ---- WeightMatrix views ------------------------------------------------------------------------

TEST(WeightMatrixView, ExpertStackViewsOneExpertAndRowSlices) {
  const int64_t experts = 3, out = 4, in = 64;
  const int bits = 4, gs = 32;
  std::vector<uint32_t> words(experts * out * in * bits / 32);
  std::vector<uint16_t> scales(experts * out * (in / gs)), biases(scales.size());
  TensorView wv, sv, bv;
  wv.name = "experts.weight";
  wv.dtype = DType::U32;
  wv.shape = {experts, out, in * bits / 32};
  wv.data = reinterpret_cast<const std::byte*>(words.data());
  wv.nbytes = words.size() * 4;
  sv.name = "experts.scales";
  sv.dtype = DType::BF16;
  sv.shape = {experts, out, in / gs};
  sv.data = reinterpret_cast<const std::byte*>(scales.data());
  sv.nbytes = scales.size() * 2;
  bv = sv;
  bv.name = "experts.biases";
  bv.data = reinterpret_cast<const std::byte*>(biases.data());
  ModuleRef mod;
  mod.path = "experts";
  mod.shape = {experts, out, in};
  mod.quantized = true;
  mod.quant.bits = bits;
  mod.quant.group_size = gs;
  mod.weight = &wv;
  mod.scales = &sv;
  mod.biases = &bv;

  const WeightMatrix w = weight_matrix(mod, 2);
  EXPECT_EQ(w.format, WeightFormat::Affine);
  EXPECT_EQ(w.rows, out);
  EXPECT_EQ(w.cols, in);
  EXPECT_EQ(w.row_bytes(), in * bits / 8);
  EXPECT_EQ(w.data, words.data() + 2 * out * in * bits / 32);
  EXPECT_EQ(w.scales, scales.data() + 2 * out * (in / gs));
  EXPECT_EQ(w.biases, biases.data() + 2 * out * (in / gs));
  EXPECT_EQ(w.bytes(), uint64_t(out * in * bits / 8 + 2 * out * (in / gs) * 2));

  const WeightMatrix s = w.row_slice(1, 2);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.data, static_cast<const uint8_t*>(w.data) + w.row_bytes());
  EXPECT_EQ(s.scales, static_cast<const uint16_t*>(w.scales) + in / gs);
  EXPECT_THROW(w.row_slice(3, 2), Error);

  for (int64_t bad : {int64_t{-1}, experts}) {
    try {
      weight_matrix(mod, bad);
      FAIL() << "expert " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  // A tensor whose byte size disagrees with the logical shape is rejected, not read past.
  wv.nbytes -= 4;
  EXPECT_THROW(weight_matrix(mod, 0), Error);
}

TEST(WeightMatrixView, DenseModule) {
  std::vector<uint16_t> data(6 * 10);
  TensorView wv;
  wv.name = "proj.weight";
  wv.dtype = DType::BF16;
  wv.shape = {6, 10};
  wv.data = reinterpret_cast<const std::byte*>(data.data());
  wv.nbytes = data.size() * 2;
  ModuleRef mod;
  mod.path = "proj";
  mod.shape = {6, 10};
  mod.weight = &wv;
  const WeightMatrix w = weight_matrix(mod);
  EXPECT_EQ(w.format, WeightFormat::BF16);
  EXPECT_EQ(w.rows, 6);
  EXPECT_EQ(w.cols, 10);
  EXPECT_EQ(w.row_bytes(), 20);
  EXPECT_EQ(w.bytes(), 120u);
  EXPECT_THROW(weight_matrix(mod, 0), Error);  // not an expert stack
  wv.dtype = DType::I32;
  EXPECT_THROW(weight_matrix(mod), Error);
}

}  // namespace
}  // namespace specula
