// The packed layout's shared factors (kernels/packed_affine.h): GGUF K-quant matrices, whose group
// scales and biases are an f32 factor per superblock times small integers, packed with one factor
// per superblock and int8 multipliers give every kernel set and precision the bytes of the same
// matrix packed with a scale and bias per group, in fewer bytes; a broken promise is an error.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "isa_guard.h"
#include "random_weights.h"
#include "specula/io/gguf.h"
#include "specula/kernels/ggml_affine.h"
#include "specula/kernels/ggml_quants.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/quant.h"
#include "specula/util/error.h"

namespace specula {
namespace {

// A matrix quantized to a K-quant type and read as affine codes with f32 scales and biases, as the
// GGUF loader converts it (model/gguf_target.cpp).
struct KQuantMatrix {
  std::vector<uint32_t> words;
  std::vector<float> scales, biases;
  WeightMatrix w;
};

KQuantMatrix kquant_matrix(GgmlType type, int64_t n, int64_t k, std::mt19937& rng) {
  const int bits = ggml_affine_bits(type), gs = ggml_affine_group(type);
  const int64_t words = k * bits / 32, groups = k / gs;
  KQuantMatrix m;
  m.words.resize(static_cast<size_t>(n * words));
  m.scales.resize(static_cast<size_t>(n * groups));
  m.biases.resize(m.scales.size());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<std::byte> blocks(static_cast<size_t>(k / 256 * ggml_type_size(type)));
  std::vector<uint8_t> codes(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    const float spread = std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4);
    for (float& v : row) v = spread * normal(rng);
    quantize_row_ggml(type, row.data(), blocks.data(), k);
    ggml_row_to_affine(type, blocks.data(), k, codes.data(), m.scales.data() + r * groups,
                       m.biases.data() + r * groups);
    pack_codes(codes, bits, std::span<uint32_t>(m.words.data() + r * words, static_cast<size_t>(words)));
  }
  m.w.format = WeightFormat::Affine;
  m.w.rows = n;
  m.w.cols = k;
  m.w.bits = bits;
  if (type == GgmlType::Q6_K) m.w.code_bits = 6;  // as the GGUF loader marks it
  m.w.group_size = gs;
  m.w.scale_dtype = DType::F32;
  m.w.data = m.words.data();
  m.w.scales = m.scales.data();
  m.w.biases = m.biases.data();
  return m;
}

std::vector<Isa> kernel_sets() {
  std::vector<Isa> out;
  if (detected_isa() >= Isa::Avx2) out.push_back(Isa::Avx2);
  if (detected_isa() == Isa::Avx512 && cpu_features().avx512vnni) out.push_back(Isa::Avx512);
  return out;
}

TEST(PackedSharedFactors, GiveTheBytesOfPerGroupParameters) {
  test::IsaGuard guard;
  if (kernel_sets().empty()) GTEST_SKIP() << "no fast kernels on this CPU";
  std::mt19937 rng(71);
  ThreadPool two(2);
  for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const int64_t n = 37, k = 768;  // a partial last block, three superblocks
    KQuantMatrix km = kquant_matrix(type, n, k, rng);
    const WeightMatrix per_group = km.w;
    WeightMatrix shared = km.w;
    shared.superblock = 256;
    ASSERT_TRUE(packable(shared));
    // Q5_K's 5-bit codes take 8 bits in the packed layout, so its parameters weigh less.
    EXPECT_LT(packed_bytes(shared) * 10, packed_bytes(per_group) * (type == GgmlType::Q5_K ? 9 : 8))
        << ggml_type_name(type);
    for (const Isa isa : kernel_sets()) {
      set_active_isa(isa);
      WeightMatrix pre_packed = shared;
      WeightMatrix* list[] = {&pre_packed};
      const PackedBuffer buffer = pack_matrices(list, two);
      for (const Precision p : {Precision::Fast, Precision::Int8}) {
        for (const int64_t m : {1, 2, 3, 4, 5, 8, 9, 17}) {
          const std::vector<float> x = test::random_activations(m, k, rng);
          std::vector<float> want(static_cast<size_t>(m * n)), got(want.size()), got_pre(want.size());
          matmul(x.data(), m, per_group, want.data(), two, p);
          matmul(x.data(), m, shared, got.data(), two, p);
          matmul(x.data(), m, pre_packed, got_pre.data(), two, p);
          const std::string what = std::string(ggml_type_name(type)) + " " + std::string(isa_name(isa)) + " " +
                                   precision_name(p) + " m=" + std::to_string(m);
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << what;
          ASSERT_EQ(0, std::memcmp(got_pre.data(), want.data(), want.size() * sizeof(float))) << what;
        }
      }
    }
  }
}

// Every kernel set's packer writes the portable packer's bytes (Q4_K: Q5_K and Q6_K codes are laid
// out code by code on every kernel set).
TEST(PackedSharedFactors, EveryKernelSetPacksTheSameBytes) {
  test::IsaGuard guard;
  std::mt19937 rng(72);
  for (const GgmlType type : {GgmlType::Q4_K}) {
    KQuantMatrix km = kquant_matrix(type, 53, 512, rng);
    km.w.superblock = 256;
    std::vector<uint8_t> portable(static_cast<size_t>(packed_bytes(km.w)));
    set_active_isa(Isa::Scalar);
    pack_affine_blocks(km.w, 0, 4, portable.data());
    for (const Isa isa : {Isa::Avx2, Isa::Avx512}) {
      if (isa > detected_isa()) continue;
      std::vector<uint8_t> wide(portable.size());
      set_active_isa(isa);
      pack_affine_blocks(km.w, 0, 4, wide.data());
      EXPECT_EQ(0, std::memcmp(wide.data(), portable.data(), wide.size()))
          << ggml_type_name(type) << " " << isa_name(isa);
    }
  }
}

// Loaders keep shared factors only where the AVX-512 VNNI kernels read them.
TEST(PackedSharedFactors, PayOnlyOnTheAvx512Kernels) {
  test::IsaGuard guard;
  WeightMatrix w;
  w.superblock = 256;
  set_active_isa(Isa::Scalar);
  EXPECT_FALSE(shared_factors_pay());
  use_shared_factors_where_they_pay(w);
  EXPECT_EQ(w.superblock, 0);
  if (detected_isa() >= Isa::Avx2) {
    set_active_isa(Isa::Avx2);
    EXPECT_FALSE(shared_factors_pay());
  }
  if (detected_isa() == Isa::Avx512) {
    set_active_isa(Isa::Avx512);
    EXPECT_EQ(shared_factors_pay(), cpu_features().avx512vnni);
    w.superblock = 256;
    use_shared_factors_where_they_pay(w);
    EXPECT_EQ(w.superblock, cpu_features().avx512vnni ? 256 : 0);
  }
}

// A matrix that promises shared factors its scales do not have is refused by name of the row,
// the inputs and the promise.
TEST(PackedSharedFactors, ABrokenPromiseIsAnError) {
  std::mt19937 rng(73);
  test::RandomWeights wt = test::random_weights(WeightFormat::Affine, 4, 32, DType::F32, 16, 256, rng);
  wt.w.superblock = 256;
  std::vector<uint8_t> out(static_cast<size_t>(packed_bytes(wt.w)));
  try {
    pack_affine_blocks(wt.w, 0, 1, out.data());
    FAIL() << "random scales factored";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("row 0 of a [16, 256] matrix: the scales of inputs [0, 256)"), std::string::npos) << what;
    EXPECT_NE(what.find("superblock 256"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace specula
