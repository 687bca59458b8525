// ggml block formats: dequantization of hand-built blocks with known bit patterns for every
// supported type, quantize -> dequantize round trips within each type's error, and Q4_1 holding
// MLX-style affine 4-bit group-32 values exactly.
#include "specula/kernels/ggml_quants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "specula/io/gguf_writer.h"
#include "specula/kernels/quant.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

constexpr uint16_t kHalfOne = 0x3c00;   // 1.0
constexpr uint16_t kHalfHalf = 0x3800;  // 0.5
constexpr uint16_t kHalfTwo = 0x4000;   // 2.0

template <typename Block>
std::vector<float> dequant(GgmlType t, const Block& b, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -12345.0f);
  dequantize_row_ggml(t, &b, out.data(), n);
  return out;
}

TEST(GgmlQuantKnown, HalfConstantsAreWhatTheTestsAssume) {
  EXPECT_EQ(f16_to_f32(kHalfOne), 1.0f);
  EXPECT_EQ(f16_to_f32(kHalfHalf), 0.5f);
  EXPECT_EQ(f16_to_f32(kHalfTwo), 2.0f);
}

TEST(GgmlQuantKnown, DenseTypes) {
  const float f32[3] = {1.5f, -2.0f, 0.0f};
  std::vector<float> out(3);
  dequantize_row_ggml(GgmlType::F32, f32, out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.5f, -2.0f, 0.0f}));
  const uint16_t f16[3] = {kHalfOne, 0xc000 /* -2 */, 0x3555 /* 0.333251953125 */};
  dequantize_row_ggml(GgmlType::F16, f16, out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 0.333251953125f}));
  const uint16_t bf16[3] = {0x3f80 /* 1 */, 0xc040 /* -3 */, 0x3e80 /* 0.25 */};
  dequantize_row_ggml(GgmlType::BF16, bf16, out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -3.0f, 0.25f}));
}

TEST(GgmlQuantKnown, Q4_0LowNibblesFirstThenHigh) {
  BlockQ4_0 b{};
  b.d = kHalfOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(GgmlType::Q4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j - 8)) << j;       // low nibble j, minus 8
    EXPECT_EQ(y[j + 16], static_cast<float>(7 - j)) << j;  // high nibble 15 - j, minus 8
  }
  b.d = kHalfHalf;
  EXPECT_EQ(dequant(GgmlType::Q4_0, b, 32)[0], -4.0f);
}

TEST(GgmlQuantKnown, Q4_1ScaleAndMin) {
  BlockQ4_1 b{};
  b.d = kHalfHalf;
  b.m = 0xc000;  // -2
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 << 4));
  const auto y = dequant(GgmlType::Q4_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j) - 2.0f) << j;
    EXPECT_EQ(y[j + 16], 5.5f) << j;
  }
}

TEST(GgmlQuantKnown, Q5_0HighBitsFromQh) {
  BlockQ5_0 b{};
  b.d = kHalfOne;
  std::memset(b.qs, 0x88, sizeof b.qs);  // every low part 8
  const uint32_t qh = (1u << 0) | (1u << 16) | (1u << 31);
  std::memcpy(b.qh, &qh, 4);
  const auto y = dequant(GgmlType::Q5_0, b, 32);
  for (int j = 0; j < 32; ++j) {
    const bool high = j == 0 || j == 16 || j == 31;
    EXPECT_EQ(y[j], high ? 8.0f : -8.0f) << j;  // (8 | 16) - 16 or 8 - 16
  }
}

TEST(GgmlQuantKnown, Q5_1HighBitsFromQh) {
  BlockQ5_1 b{};
  b.d = kHalfTwo;
  b.m = kHalfOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(0x0f | (j << 4));
  const uint32_t qh = 0x80000002u;  // elements 1 and 31
  std::memcpy(b.qh, &qh, 4);
  const auto y = dequant(GgmlType::Q5_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * static_cast<float>(j == 1 ? 31 : 15) + 1.0f) << j;
    EXPECT_EQ(y[j + 16], 2.0f * static_cast<float>(j + (j == 15 ? 16 : 0)) + 1.0f) << j;
  }
}

TEST(GgmlQuantKnown, Q8_0SignedBytes) {
  BlockQ8_0 b{};
  b.d = kHalfHalf;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  const auto y = dequant(GgmlType::Q8_0, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(j * 8 - 128)) << j;
}

TEST(GgmlQuantKnown, KScaleMinPacking) {
  // Hand-packed: scales 1..8, mins 0..7 (all below 16: no high bits).
  const uint8_t packed[12] = {1, 2, 3, 4, 0, 1, 2, 3, 0x45, 0x56, 0x67, 0x78};
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    get_scale_min_k4(j, packed, &sc, &mn);
    EXPECT_EQ(sc, j + 1) << j;
    EXPECT_EQ(mn, j) << j;
  }
  // High bits of sub-blocks 4..7 live in the top two bits of bytes 0..7.
  uint8_t q[12] = {};
  set_scale_min_k4(4, 63, 40, q);
  EXPECT_EQ(q[8], 0x8f);  // low nibbles: scale 0xf, min 0x8
  EXPECT_EQ(q[0], 0xc0);  // scale >> 4 = 3
  EXPECT_EQ(q[4], 0x80);  // min >> 4 = 2
  // Every value pair survives in every slot, without disturbing the others.
  for (int j = 0; j < 8; ++j) {
    for (int sc = 0; sc < 64; sc += 7) {
      for (int mn = 0; mn < 64; mn += 5) {
        uint8_t s[12];
        for (int k = 0; k < 8; ++k) set_scale_min_k4(k, static_cast<uint8_t>(63 - k), static_cast<uint8_t>(k * 9), s);
        set_scale_min_k4(j, static_cast<uint8_t>(sc), static_cast<uint8_t>(mn), s);
        for (int k = 0; k < 8; ++k) {
          uint8_t a, b;
          get_scale_min_k4(k, s, &a, &b);
          EXPECT_EQ(a, k == j ? sc : 63 - k);
          EXPECT_EQ(b, k == j ? mn : k * 9);
        }
      }
    }
  }
}

TEST(GgmlQuantKnown, Q4_KSubBlocks) {
  BlockQ4_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  const uint8_t packed[12] = {1, 2, 3, 4, 0, 1, 2, 3, 0x45, 0x56, 0x67, 0x78};  // scales 1..8, mins 0..7
  std::memcpy(b.scales, packed, 12);
  std::memset(b.qs, 0x21, sizeof b.qs);  // low nibbles 1, high nibbles 2
  const auto y = dequant(GgmlType::Q4_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;                // sub-block
    const float q = s % 2 == 0 ? 1 : 2;  // even sub-blocks from the low nibbles
    EXPECT_EQ(y[e], static_cast<float>(s + 1) * q - 0.5f * static_cast<float>(s)) << e;
  }
  // One element: byte 32c + l holds elements 64c + l (low) and 64c + 32 + l (high).
  b.qs[32 * 2 + 5] = 0xf0;
  const auto z = dequant(GgmlType::Q4_K, b, 256);
  EXPECT_EQ(z[64 * 2 + 5], 0.0f - 0.5f * 4);
  EXPECT_EQ(z[64 * 2 + 32 + 5], 6.0f * 15 - 0.5f * 5);
}

TEST(GgmlQuantKnown, Q5_KHighBitPairsPerChunk) {
  BlockQ5_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfOne;
  for (int j = 0; j < 8; ++j) set_scale_min_k4(j, 1, static_cast<uint8_t>(j), b.scales);
  // qh[l] bit 2c: element 64c + l; bit 2c+1: element 64c + 32 + l.
  for (int l = 0; l < 32; ++l) b.qh[l] = 0x01 | 0x08;  // chunk 0 low half, chunk 1 high half
  const auto y = dequant(GgmlType::Q5_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    const float q = (s == 0 || s == 3) ? 16 : 0;
    EXPECT_EQ(y[e], q - static_cast<float>(s)) << e;
  }
}

TEST(GgmlQuantKnown, Q6_KLayout) {
  BlockQ6_K b{};
  b.d = kHalfOne;
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s - 8);
  auto y = dequant(GgmlType::Q6_K, b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], -32.0f * static_cast<float>(e / 16 - 8)) << e;  // every q = 0 - 32

  // First half: ql[0] = 0x5f, ql[32] = 0x00, qh[0] = 0b11'10'01'00 feed elements 0, 32, 64, 96.
  b.ql[0] = 0x5f;
  b.qh[0] = 0xe4;
  // Second half (ql[64..], qh[32..], scales[8..]): element 128 + 32 + 1 from ql[64 + 32 + 1] low, qh[32 + 1] bits 2-3.
  b.ql[64 + 33] = 0x07;
  b.qh[32 + 1] = 0x0c;
  y = dequant(GgmlType::Q6_K, b, 256);
  EXPECT_EQ(y[0], static_cast<float>(b.scales[0] * (15 - 32)));
  EXPECT_EQ(y[32], static_cast<float>(b.scales[2] * ((0 | (1 << 4)) - 32)));
  EXPECT_EQ(y[64], static_cast<float>(b.scales[4] * ((5 | (2 << 4)) - 32)));
  EXPECT_EQ(y[96], static_cast<float>(b.scales[6] * ((0 | (3 << 4)) - 32)));
  EXPECT_EQ(y[128 + 33], static_cast<float>(b.scales[8 + 2] * ((7 | (3 << 4)) - 32)));
}

TEST(GgmlQuantKnown, SeveralBlocksAndUnalignedSource) {
  // Three Q8_0 blocks at an odd address.
  std::vector<std::byte> raw(1 + 3 * sizeof(BlockQ8_0));
  for (int i = 0; i < 3; ++i) {
    BlockQ8_0 b{};
    b.d = f32_to_f16(static_cast<float>(i + 1));
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j);
    std::memcpy(raw.data() + 1 + i * sizeof b, &b, sizeof b);
  }
  std::vector<float> y(96);
  dequantize_row_ggml(GgmlType::Q8_0, raw.data() + 1, y.data(), 96);
  for (int e = 0; e < 96; ++e) EXPECT_EQ(y[e], static_cast<float>((e / 32 + 1) * (e % 32))) << e;
}

// ---------------------------------------------------------------------------------------------
// Round trips

struct ErrorStats {
  double max_abs = 0, rms = 0;
};

ErrorStats round_trip(GgmlType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<std::byte> q(*ggml_row_bytes(t, static_cast<uint64_t>(n)));
  quantize_row_ggml(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  dequantize_row_ggml(t, q.data(), y.data(), n);
  ErrorStats s;
  double sq = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = std::fabs(static_cast<double>(y[i]) - x[i]);
    s.max_abs = std::max(s.max_abs, e);
    sq += e * e;
    ref += static_cast<double>(x[i]) * x[i];
  }
  s.rms = std::sqrt(sq / ref);  // relative to the data's RMS
  return s;
}

std::vector<float> gaussian(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

TEST(GgmlQuantRoundTrip, ErrorWithinEachTypesBound) {
  struct Case {
    GgmlType type;
    double max_rms;  // relative RMS error on unit Gaussian data
  };
  // About 1.3 times what these quantizers reach (measured): ggml's searching quantizers do better
  // on the K-quants; the bound is there to catch a broken layout, not to rank them.
  const Case cases[] = {
      {GgmlType::F32, 0.0},    {GgmlType::F16, 3e-4},   {GgmlType::BF16, 2.5e-3}, {GgmlType::Q8_0, 0.007},
      {GgmlType::Q6_K, 0.025}, {GgmlType::Q5_0, 0.055}, {GgmlType::Q5_1, 0.05},   {GgmlType::Q5_K, 0.05},
      {GgmlType::Q4_0, 0.11},  {GgmlType::Q4_1, 0.10},  {GgmlType::Q4_K, 0.10},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(ggml_type_name(c.type)));
    for (unsigned seed : {1u, 2u, 3u}) {
      const auto x = gaussian(256 * 8, seed, seed == 3 ? 1e-3f : 1.0f);
      const ErrorStats s = round_trip(c.type, x);
      EXPECT_LE(s.rms, c.max_rms) << "seed " << seed;
    }
  }
}

TEST(GgmlQuantRoundTrip, MaxErrorPerBlockForSymmetricTypes) {
  // Q8_0 / Q4_0 / Q5_0: each value within one step (the far side of the signed maximum clamps) of
  // the block's absmax / levels.
  const auto x = gaussian(32 * 64, 7);
  const std::pair<GgmlType, double> types[] = {{GgmlType::Q8_0, 127.0}, {GgmlType::Q4_0, 8.0}, {GgmlType::Q5_0, 16.0}};
  for (auto [t, levels] : types) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    std::vector<std::byte> q(*ggml_row_bytes(t, x.size()));
    quantize_row_ggml(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
    std::vector<float> y(x.size());
    dequantize_row_ggml(t, q.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
      const double step = amax / levels * 1.002;  // the scale is stored as f16
      for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), step) << b << " " << j;
    }
  }
}

TEST(GgmlQuantRoundTrip, ZerosAndConstantsStayExact) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    const std::vector<float> zeros(256, 0.0f);
    EXPECT_EQ(round_trip(t, zeros).max_abs, 0.0);
    // A constant: exact up to the f16 rounding of the scale.
    const std::vector<float> constant(256, -0.5f);
    EXPECT_LE(round_trip(t, constant).max_abs, 0.5 * 1e-3);
  }
}

TEST(GgmlQuantRoundTrip, BlocksAreValidForTheReader) {
  // Quantized rows written to a file read back and dequantize identically through the tensor API.
  GgufWriter w(16);
  const auto x = gaussian(512, 11);
  std::vector<std::vector<float>> expected;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_1, GgmlType::BF16}) {
    std::vector<std::byte> q(*ggml_row_bytes(t, 512));
    quantize_row_ggml(t, x.data(), q.data(), 512);
    std::vector<float> y(512);
    dequantize_row_ggml(t, q.data(), y.data(), 512);
    expected.push_back(y);
    w.add_tensor(std::string(ggml_type_name(t)), t, {256, 2}, q);
  }
  const auto bytes = w.bytes();
  const GgufFile f = GgufFile::from_bytes(bytes);
  ASSERT_EQ(f.tensors().size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const GgufTensor& t = f.tensors()[i];
    std::vector<float> row(256);
    for (int64_t r = 0; r < 2; ++r) {
      dequantize_gguf_row(t, r, row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), expected[i].begin() + 256 * r)) << t.name << " row " << r;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// MLX affine 4-bit, group size 32, as Q4_1

TEST(GgmlQuantMlx, Q4_1HoldsAffineGroup32Exactly) {
  // An MLX-quantized row: 4-bit codes packed LSB-first into u32 words, one (scale, bias) per 32
  // elements; value = scale * code + bias. Scales and biases chosen exact in f16, so Q4_1's f16
  // d and m hold them without rounding.
  constexpr int kGroups = 6, kN = 32 * kGroups;
  std::mt19937 rng(5);
  std::vector<uint8_t> codes(kN);
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() % 16);
  std::vector<uint32_t> words(kN * 4 / 32);
  pack_codes(codes, 4, words);
  std::vector<float> scale(kGroups), bias(kGroups);
  for (int g = 0; g < kGroups; ++g) {
    scale[g] = std::ldexp(1.0f + 0.125f * static_cast<float>(g), -4 - g);
    bias[g] = -0.75f + 0.3125f * static_cast<float>(g);
  }

  std::vector<BlockQ4_1> blocks(kGroups);
  std::vector<float> mlx(kN);
  for (int g = 0; g < kGroups; ++g) {
    BlockQ4_1& b = blocks[g];
    b.d = f32_to_f16(scale[g]);
    b.m = f32_to_f16(bias[g]);
    ASSERT_EQ(f16_to_f32(b.d), scale[g]);
    ASSERT_EQ(f16_to_f32(b.m), bias[g]);
    for (int j = 0; j < 32; ++j) {
      const auto code = static_cast<uint8_t>(unpack_code(words.data(), 4, 32 * g + j));
      mlx[32 * g + j] = scale[g] * static_cast<float>(code) + bias[g];
      // Q4_1 keeps element j in the low nibble of byte j (j < 16), else the high nibble of j - 16.
      if (j < 16)
        b.qs[j] = static_cast<uint8_t>((b.qs[j] & 0xf0) | code);
      else
        b.qs[j - 16] = static_cast<uint8_t>((b.qs[j - 16] & 0x0f) | (code << 4));
    }
  }
  std::vector<float> y(kN);
  dequantize_row_ggml(GgmlType::Q4_1, blocks.data(), y.data(), kN);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(y[i], mlx[i]) << i;

  // The reference quantizer finds the same grid when each group spans all 16 codes.
  std::vector<float> full(kN);
  for (int g = 0; g < kGroups; ++g)
    for (int j = 0; j < 32; ++j) full[32 * g + j] = scale[g] * static_cast<float>(j % 16) + bias[g];
  std::vector<BlockQ4_1> requant(kGroups);
  quantize_row_ggml(GgmlType::Q4_1, full.data(), requant.data(), kN);
  dequantize_row_ggml(GgmlType::Q4_1, requant.data(), y.data(), kN);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(y[i], full[i]) << i;
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(GgmlQuantErrors, UnsupportedTypesAndBadLengths) {
  std::vector<std::byte> buf(1024);
  std::vector<float> out(256);
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q8_1, GgmlType::IQ2_XXS, GgmlType::I32}) {
    EXPECT_FALSE(ggml_dequant_supported(t));
    try {
      dequantize_row_ggml(t, buf.data(), out.data(), 256);
      ADD_FAILURE() << "accepted " << ggml_type_name(t);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("dequantizing {} is not supported", ggml_type_name(t))),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(quantize_row_ggml(t, out.data(), buf.data(), 256), Error);
  }
  try {
    dequantize_row_ggml(GgmlType::Q4_K, buf.data(), out.data(), 128);
    ADD_FAILURE() << "accepted 128 elements of q4_K";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("128 elements is not a multiple of the block size 256"), std::string::npos)
        << e.what();
  }

  GgufWriter w;
  w.add_tensor("blk.0.ffn_up.weight", GgmlType::Q2_K, {256}, std::vector<std::byte>(84));
  w.add_tensor("ok", GgmlType::F32, {4, 2}, std::vector<std::byte>(32));
  const auto bytes = w.bytes();
  const GgufFile f = GgufFile::from_bytes(bytes);
  try {
    dequantize_gguf_row(f.tensor("blk.0.ffn_up.weight"), 0, out.data());
    ADD_FAILURE() << "dequantized q2_K";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.0.ffn_up.weight' is q2_K, which specula cannot dequantize"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(dequantize_gguf_row(f.tensor("ok"), 2, out.data()), Error);
  EXPECT_THROW(dequantize_gguf_row(f.tensor("ok"), -1, out.data()), Error);
  dequantize_gguf_row(f.tensor("ok"), 1, out.data());
  EXPECT_EQ(out[0], 0.0f);
}

}  // namespace
}  // namespace specula
