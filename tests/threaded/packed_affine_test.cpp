// The fast kernels' packed weight layout (kernels/packed_affine.h): it holds every code, scale and
// bias where the header says, a pre-packed matrix gives the bytes of one packed per call, and
// prefills that take X in several passes give each row its decode bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "random_weights.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/quant.h"
#include "specula/util/error.h"

namespace specula {
namespace {

struct Format {
  int bits;
  int gs;
  DType sd;
};

std::vector<Format> packable_formats() {
  std::vector<Format> out;
  for (int bits : {4, 8}) {
    for (int gs : {32, 64, 128}) {
      for (DType sd : {DType::BF16, DType::F16, DType::F32}) out.push_back({bits, gs, sd});
    }
  }
  for (DType sd : {DType::BF16, DType::F16, DType::F32}) out.push_back({8, 16, sd});  // GGUF Q6_K
  // Narrower codes, widened to the 4- or 8-bit layout.
  for (int bits : {2, 3, 5, 6}) out.push_back({bits, 32, DType::F16});
  for (int bits : {5, 6}) out.push_back({bits, 16, DType::F32});
  return out;
}

// Reads code (n, k) back from the packed bytes by the layout the header documents.
uint32_t packed_code(const WeightMatrix& w, const uint8_t* packed, int64_t n, int64_t k) {
  const int64_t block = n / kPackedRows, j = n % kPackedRows, g = k / w.group_size, kk = k % w.group_size;
  const uint8_t* group = packed + (block * w.groups_per_row() + g) * packed_group_bytes(w);
  if (packed_code_bits(w) == 8) return group[(kk / 2) * 32 + 2 * j + kk % 2];
  if (packed_code_bits(w) == 6) {
    // Inputs k..k+7 take three chunks: low nibbles of k..k+3, of k+4..k+7, then the top bits.
    const uint8_t* three = group + (kk / 8) * 96;
    const int i = static_cast<int>(kk % 8), quad = i / 4, in_quad = i % 4;
    const uint8_t low = three[32 * quad + 2 * j + in_quad % 2] >> (4 * (in_quad / 2));
    const uint8_t top = three[64 + 2 * j + in_quad % 2] >> (2 * (in_quad / 2) + 4 * quad);
    return (low & 0x0f) | (top & 3) << 4;
  }
  const uint8_t byte = group[(kk / 4) * 32 + 2 * j + (kk % 4) % 2];
  return (kk % 4) < 2 ? byte & 0x0f : byte >> 4;
}

TEST(PackedAffine, HoldsEveryCodeScaleAndBiasWhereTheLayoutSays) {
  std::mt19937 rng(5);
  for (const Format& f : packable_formats()) {
    const int64_t n = 37, k = 256;  // a partial last block
    const test::RandomWeights wt = test::random_weights(WeightFormat::Affine, f.bits, f.gs, f.sd, n, k, rng);
    const WeightMatrix& w = wt.w;
    ASSERT_TRUE(packable(w));
    std::vector<uint8_t> packed(static_cast<size_t>(packed_bytes(w)), 0xAB);
    pack_affine_blocks(w, 0, (n + kPackedRows - 1) / kPackedRows, packed.data());
    const size_t sd = dtype_size(f.sd);
    const int64_t code_bytes = packed_group_bytes(w) - 2 * kPackedRows * static_cast<int64_t>(sd);
    for (int64_t row = 0; row < 48; ++row) {  // three blocks: rows past N must read as zero
      const auto* words =
          reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(w.data) + std::min(row, n - 1) * w.row_bytes());
      for (int64_t col = 0; col < k; ++col) {
        const uint32_t want = row < n ? unpack_code(words, f.bits, col) : 0;
        ASSERT_EQ(packed_code(w, packed.data(), row, col), want)
            << f.bits << "-bit gs " << f.gs << " (" << row << ", " << col << ")";
      }
      for (int64_t g = 0; g < w.groups_per_row(); ++g) {
        const uint8_t* group = packed.data() + ((row / 16) * w.groups_per_row() + g) * packed_group_bytes(w);
        const uint8_t* scale = group + code_bytes + (row % 16) * sd;
        const uint8_t* bias = group + code_bytes + (16 + row % 16) * sd;
        const std::vector<uint8_t> zero(sd, 0);
        const size_t at = static_cast<size_t>((row * w.groups_per_row() + g)) * sd;
        ASSERT_EQ(0, std::memcmp(scale, row < n ? wt.scales.data() + at : zero.data(), sd)) << row << " " << g;
        ASSERT_EQ(0, std::memcmp(bias, row < n ? wt.biases.data() + at : zero.data(), sd)) << row << " " << g;
      }
    }
  }
}

// The AVX-512 and AVX2 packers (whole blocks) and the portable one write the same bytes. (Codes
// of other widths are laid out code by code on every kernel set.)
TEST(PackedAffine, EveryKernelSetPacksTheSameBytes) {
  const Isa saved = active_isa();
  std::mt19937 rng(9);
  for (const Format& f : packable_formats()) {
    if (f.bits != 4 && f.bits != 8) continue;
    const int64_t n = 53, k = 384;
    const test::RandomWeights wt = test::random_weights(WeightFormat::Affine, f.bits, f.gs, f.sd, n, k, rng);
    std::vector<uint8_t> portable(static_cast<size_t>(packed_bytes(wt.w)));
    set_active_isa(Isa::Scalar);
    pack_affine_blocks(wt.w, 0, 4, portable.data());
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
      if (isa > detected_isa()) continue;
      std::vector<uint8_t> wide(portable.size());
      set_active_isa(isa);
      pack_affine_blocks(wt.w, 0, 4, wide.data());
      EXPECT_EQ(0, std::memcmp(wide.data(), portable.data(), wide.size()))
          << f.bits << "-bit gs " << f.gs << " " << isa_name(isa);
    }
    set_active_isa(saved);
  }
}

TEST(PackedAffine, PrePackedMatricesGiveThePerCallBytes) {
  std::mt19937 rng(6);
  ThreadPool two(2);
  for (const Format& f : packable_formats()) {
    test::RandomWeights wt = test::random_weights(WeightFormat::Affine, f.bits, f.gs, f.sd, 50, 384, rng);
    const int64_t m = 5;
    const std::vector<float> x = test::random_activations(m, 384, rng);
    std::vector<float> per_call(m * 50), pre(m * 50);
    matmul(x.data(), m, wt.w, per_call.data(), two, Precision::Fast);
    WeightMatrix packed_view = wt.w;
    WeightMatrix* list[] = {&packed_view};
    int calls = 0;
    const PackedBuffer buffer = pack_matrices(list, two, [&](const WeightMatrix&) { ++calls; });
    ASSERT_EQ(calls, 1);
    ASSERT_NE(packed_view.packed, nullptr);
    matmul(x.data(), m, packed_view, pre.data(), two, Precision::Fast);
    ASSERT_EQ(0, std::memcmp(per_call.data(), pre.data(), pre.size() * sizeof(float))) << f.bits << " " << f.gs;
    EXPECT_EQ(packed_view.row_slice(16, 16).packed, nullptr);  // a slice is not the packed matrix
  }
}

TEST(PackedAffine, LeavesOtherFormatsAlone) {
  std::mt19937 rng(7);
  ThreadPool one(1);
  test::RandomWeights bf16 = test::random_weights(WeightFormat::BF16, 0, 0, DType::BF16, 8, 64, rng);
  test::RandomWeights q4g16 = test::random_weights(WeightFormat::Affine, 4, 16, DType::BF16, 8, 64, rng);
  WeightMatrix* list[] = {&bf16.w, &q4g16.w};
  int calls = 0;
  const PackedBuffer buffer = pack_matrices(list, one, [&](const WeightMatrix&) { ++calls; });
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(bf16.w.packed, nullptr);
  EXPECT_EQ(q4g16.w.packed, nullptr);
}

// Codes narrower than their layout take the layout's bytes: 2- and 3-bit codes those of 4-bit, 5-
// and 6-bit codes those of 6-bit where the kernels read 6-bit codes, else of 8-bit.
TEST(PackedAffine, NarrowCodesTakeTheWiderLayoutsBytes) {
  std::mt19937 rng(10);
  for (const int bits : {2, 3, 5, 6}) {
    const int wider = bits <= 4 ? 4 : six_bit_codes_pay() ? 6 : 8;
    test::RandomWeights narrow = test::random_weights(WeightFormat::Affine, bits, 32, DType::F16, 20, 128, rng);
    WeightMatrix as_wide = narrow.w;
    as_wide.bits = wider;
    EXPECT_EQ(packed_code_bits(narrow.w), wider);
    EXPECT_EQ(packed_bytes(narrow.w), packed_bytes(as_wide)) << bits;
  }
  const test::RandomWeights q5 = test::random_weights(WeightFormat::Affine, 5, 16, DType::F32, 4, 64, rng);
  WeightMatrix odd = q5.w;
  odd.cols = 48;
  EXPECT_TRUE(packable(q5.w));
  EXPECT_FALSE(packable(odd)) << "a row of 48 5-bit codes is not a whole number of words";
}

// 8-bit codes promised to fit in 6 bits (GGUF Q6_K) take the 6-bit layout where the kernels read
// it, and give the bytes of the same codes read as 8-bit; a code that breaks the promise is an
// error when packed.
TEST(PackedAffine, CodesPromisedNarrowerTakeTheNarrowLayout) {
  std::mt19937 rng(11);
  ThreadPool two(2);
  const int64_t n = 40, k = 512, m = 9;
  test::RandomWeights wt = test::random_weights(WeightFormat::Affine, 8, 16, DType::F32, n, k, rng);
  for (uint8_t& byte : wt.data) byte &= 63;  // every code below 64
  WeightMatrix narrow = wt.w;
  narrow.code_bits = 6;
  EXPECT_EQ(packed_code_bits(narrow), six_bit_codes_pay() ? 6 : 8);
  if (six_bit_codes_pay()) {
    EXPECT_LT(packed_bytes(narrow), packed_bytes(wt.w));
  }
  const std::vector<float> x = test::random_activations(m, k, rng);
  for (const Precision p : {Precision::Fast, Precision::Int8}) {
    std::vector<float> want(m * n), got(m * n);
    matmul(x.data(), m, wt.w, want.data(), two, p);
    matmul(x.data(), m, narrow, got.data(), two, p);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << precision_name(p);
  }
  if (six_bit_codes_pay()) {
    wt.data[5 * narrow.row_bytes() + 7] = 200;  // row 5, input 7
    WeightMatrix* list[] = {&narrow};
    try {
      const PackedBuffer buffer = pack_matrices(list, two);
      ADD_FAILURE() << "a code of 200 was packed as 6-bit";
    } catch (const Error& e) {
      EXPECT_NE(
          std::string(e.what()).find("row 5 of a [40, 512] matrix: a code of inputs [0, 16) does not fit in 6 bits"),
          std::string::npos)
          << e.what();
    }
  }
}

// K = 16384 makes a prefill pass (kFastPrefillBytes of int16 X rows) 16 rows long: 40 rows take
// three passes, and each row still gets the bytes of a one-row call.
TEST(PackedAffine, PrefillPassesGiveEachRowItsDecodeBytes) {
  std::mt19937 rng(8);
  ThreadPool two(2);
  const int64_t n = 20, k = 16384, m = 40;
  test::RandomWeights wt = test::random_weights(WeightFormat::Affine, 4, 128, DType::BF16, n, k, rng);
  const std::vector<float> x = test::random_activations(m, k, rng);
  std::vector<float> all(m * n), one(n);
  matmul(x.data(), m, wt.w, all.data(), two, Precision::Fast);
  for (int64_t i = 0; i < m; ++i) {
    matmul(x.data() + i * k, 1, wt.w, one.data(), two, Precision::Fast);
    ASSERT_EQ(0, std::memcmp(one.data(), &all[i * n], n * sizeof(float))) << "row " << i;
  }
}

}  // namespace
}  // namespace specula
