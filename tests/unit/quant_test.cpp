// MLX affine quantization (docs/gemma4.md §4): packing, the runtime quantizer, dequantization and
// gathers, checked against independent bit-level decoders written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/kernels/quant.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

const int kAllBits[] = {2, 3, 4, 5, 6, 8};
const int kAllGroups[] = {16, 32, 64, 128};

// Independent encoder: sets stream bit b*j + t for every set bit t of code j.
std::vector<uint32_t> encode_bit_by_bit(const std::vector<uint8_t>& codes, int bits) {
  std::vector<uint32_t> words(codes.size() * bits / 32, 0u);
  for (size_t j = 0; j < codes.size(); ++j) {
    for (int t = 0; t < bits; ++t) {
      if ((codes[j] >> t) & 1u) {
        const size_t pos = j * bits + t;
        words[pos / 32] |= 1u << (pos % 32);
      }
    }
  }
  return words;
}

// Independent decoder of code j from a little-endian byte stream (docs/gemma4.md §4).
uint32_t decode_bit_by_bit(const uint8_t* bytes, int bits, int64_t j) {
  uint32_t q = 0;
  for (int t = 0; t < bits; ++t) {
    const int64_t pos = j * bits + t;
    q |= static_cast<uint32_t>((bytes[pos / 8] >> (pos % 8)) & 1u) << t;
  }
  return q;
}

// Independent widening of stored scale/bias/weight values.
float decode_bf16(uint16_t h) {
  uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float decode_f16(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double v;
  if (exp == 0)
    v = std::ldexp(static_cast<double>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return static_cast<float>(sign ? -v : v);
}
float decode_scale(const void* p, DType t, int64_t i) {
  if (t == DType::BF16) return decode_bf16(static_cast<const uint16_t*>(p)[i]);
  if (t == DType::F16) return decode_f16(static_cast<const uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

TEST(QuantPack, FourBitCodesZeroToFifteen) {
  std::vector<uint8_t> codes(16);
  for (int i = 0; i < 16; ++i) codes[i] = static_cast<uint8_t>(i);
  std::vector<uint32_t> words(2);
  pack_codes(codes, 4, words);
  EXPECT_EQ(words[0], 0x76543210u);
  EXPECT_EQ(words[1], 0xfedcba98u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(unpack_code(words.data(), 4, i), static_cast<uint32_t>(i));
}

TEST(QuantPack, StreamsMatchBitByBitEncoderForEveryWidth) {
  std::mt19937 rng(7);
  for (int bits : kAllBits) {
    SCOPED_TRACE("bits " + std::to_string(bits));
    const size_t n = 96;  // 96 * bits is a multiple of 32 for every width; 3/5/6 bits straddle words
    std::vector<uint8_t> codes(n);
    for (auto& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1u));
    std::vector<uint32_t> words(n * bits / 32);
    pack_codes(codes, bits, words);
    EXPECT_EQ(words, encode_bit_by_bit(codes, bits));
    for (size_t j = 0; j < n; ++j) ASSERT_EQ(unpack_code(words.data(), bits, j), codes[j]) << "code " << j;
  }
}

TEST(QuantPack, ThreeBitLayoutIsEightValuesInThreeBytes) {
  // MLX's Metal kernels write 3 bytes per 8 values; same stream read as LE words.
  std::vector<uint8_t> codes = {1, 2, 3, 4, 5, 6, 7, 0, 7, 6, 5, 4, 3, 2, 1, 0,
                                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  std::vector<uint32_t> words(3);
  pack_codes(codes, 3, words);
  const auto* bytes = reinterpret_cast<const uint8_t*>(words.data());
  // Values 1..7,0 -> bits 001 010 011 100 101 110 111 000 LSB first.
  EXPECT_EQ(bytes[0], 0b11010001);
  EXPECT_EQ(bytes[1], 0b01011000);
  EXPECT_EQ(bytes[2], 0b00011111);
  EXPECT_EQ(bytes[11] >> 5, 7);
}

TEST(QuantPack, RejectsBadInput) {
  std::vector<uint8_t> codes(8, 0);
  std::vector<uint32_t> words(1);
  codes[3] = 16;
  EXPECT_THROW(pack_codes(codes, 4, words), Error);
  codes[3] = 1;
  std::vector<uint32_t> wrong(2);
  EXPECT_THROW(pack_codes(codes, 4, wrong), Error);
  EXPECT_THROW(pack_codes(codes, 7, words), Error);
  std::vector<uint8_t> odd(5, 0);
  EXPECT_THROW(pack_codes(odd, 4, words), Error);
}

WeightMatrix f32_affine_view(const std::vector<uint32_t>& words, const std::vector<float>& scales,
                             const std::vector<float>& biases, int64_t rows, int64_t cols, int bits, int gs) {
  WeightMatrix w;
  w.format = WeightFormat::Affine;
  w.rows = rows;
  w.cols = cols;
  w.bits = bits;
  w.group_size = gs;
  w.scale_dtype = DType::F32;
  w.data = words.data();
  w.scales = scales.data();
  w.biases = biases.data();
  return w;
}

TEST(QuantRuntime, SymmetricRangeUsesNegativeScaleAndClampsTheFarEnd) {
  // [-0.96, 1] at 4 bits: |max| >= |min| -> edge = max, scale = -1.96/15, q0 = round(-7.65) = -8,
  // scale = 1/-8, bias = 1; -0.96 maps to code 15.68 -> 16, clamped to 15 (MLX's fallback op).
  std::vector<float> row(32, 0.0f);
  row[0] = -0.96f;
  row[1] = 1.0f;
  std::vector<uint32_t> words(4);
  std::vector<float> s(1), b(1);
  quantize_row_affine(row, 4, 32, words, s, b);
  EXPECT_EQ(s[0], -0.125f);
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(unpack_code(words.data(), 4, 0), 15u);
  EXPECT_EQ(unpack_code(words.data(), 4, 1), 0u);
  EXPECT_EQ(unpack_code(words.data(), 4, 2), 8u);
}

TEST(QuantRuntime, RoundTripErrorIsBoundedPerGroup) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int bits : kAllBits) {
    for (int gs : kAllGroups) {
      SCOPED_TRACE("bits " + std::to_string(bits) + " group " + std::to_string(gs));
      const int64_t groups = 6, cols = groups * gs;
      std::vector<float> row(cols);
      for (int64_t g = 0; g < groups; ++g) {
        float* v = row.data() + g * gs;
        for (int j = 0; j < gs; ++j) {
          switch (g) {
            case 0: v[j] = uni(rng); break;                            // mixed signs
            case 1: v[j] = 0.25f + 0.5f * std::fabs(uni(rng)); break;  // max dominates: scale < 0
            case 2: v[j] = -3.0f + 0.5f * std::fabs(uni(rng)); break;  // min dominates: scale > 0
            case 3: v[j] = 0.7f; break;                                // constant group
            case 4: v[j] = 0.0f; break;                                // all zero
            default: v[j] = 1e-3f * uni(rng); break;                   // tiny range
          }
        }
      }
      std::vector<uint32_t> words(cols * bits / 32);
      std::vector<float> scales(groups), biases(groups);
      quantize_row_affine(row, bits, gs, words, scales, biases);
      EXPECT_LT(scales[1], 0.0f);
      EXPECT_GT(scales[2], 0.0f);
      const WeightMatrix w = f32_affine_view(words, scales, biases, 1, cols, bits, gs);
      std::vector<float> back(cols);
      dequantize_row(w, 0, back.data());
      const uint32_t top = (1u << bits) - 1u;
      for (int64_t g = 0; g < groups; ++g) {
        const float step = std::fabs(scales[g]);
        float lo = row[g * gs], hi = row[g * gs];
        for (int j = 0; j < gs; ++j) {
          lo = std::min(lo, row[g * gs + j]);
          hi = std::max(hi, row[g * gs + j]);
        }
        // The larger-magnitude extreme is exactly representable.
        const float edge = std::fabs(lo) > std::fabs(hi) ? lo : hi;
        for (int j = 0; j < gs; ++j) {
          const int64_t i = g * gs + j;
          const float err = std::fabs(back[i] - row[i]);
          const uint32_t q = unpack_code(words.data(), bits, i);
          const float slack = 1e-5f * (std::fabs(row[i]) + std::fabs(biases[g])) + 1e-12f;
          if (row[i] == edge) {
            EXPECT_EQ(back[i], row[i]) << "group " << g << " element " << j;
          }
          if (q > 0 && q < top) {
            ASSERT_LE(err, step / 2 + slack) << "group " << g << " element " << j;
          } else {
            // A clamped far extreme can be off by one whole step (q0 rounding).
            ASSERT_LE(err, step + slack) << "group " << g << " element " << j;
          }
        }
      }
      // Constant and zero groups come back exactly.
      for (int j = 0; j < gs; ++j) {
        EXPECT_EQ(back[3 * gs + j], 0.7f);
        EXPECT_EQ(back[4 * gs + j], 0.0f);
      }
    }
  }
}

// Random affine matrix stored with the given scale dtype.
struct AffineFixture {
  std::vector<uint32_t> words;
  std::vector<uint16_t> sb16;
  std::vector<float> sb32;
  WeightMatrix w;
};

AffineFixture make_affine(int64_t rows, int64_t cols, int bits, int gs, DType sd, std::mt19937& rng) {
  AffineFixture f;
  const int64_t groups = cols / gs;
  std::vector<uint8_t> codes(cols);
  f.words.resize(rows * cols * bits / 32);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1u));
    pack_codes(codes, bits, std::span<uint32_t>(f.words.data() + r * cols * bits / 32, cols * bits / 32));
  }
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t count = rows * groups;
  f.sb32.resize(2 * count);
  f.sb16.resize(2 * count);
  for (int64_t i = 0; i < 2 * count; ++i) {
    const float v = i < count ? 0.1f * uni(rng) : uni(rng);  // scales (either sign), biases
    f.sb32[i] = v;
    f.sb16[i] = sd == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
  }
  f.w.format = WeightFormat::Affine;
  f.w.rows = rows;
  f.w.cols = cols;
  f.w.bits = bits;
  f.w.group_size = gs;
  f.w.scale_dtype = sd;
  f.w.data = f.words.data();
  if (sd == DType::F32) {
    f.w.scales = f.sb32.data();
    f.w.biases = f.sb32.data() + count;
  } else {
    f.w.scales = f.sb16.data();
    f.w.biases = f.sb16.data() + count;
  }
  return f;
}

void expect_row_matches_independent_decode(const WeightMatrix& w, int64_t r) {
  std::vector<float> got(w.cols);
  dequantize_row(w, r, got.data());
  const auto* bytes = static_cast<const uint8_t*>(w.data) + r * (w.cols * w.bits / 8);
  const int64_t groups = w.cols / w.group_size;
  for (int64_t j = 0; j < w.cols; ++j) {
    const int64_t g = r * groups + j / w.group_size;
    const float q = static_cast<float>(decode_bit_by_bit(bytes, w.bits, j));
    const float s = decode_scale(w.scales, w.scale_dtype, g);
    const float b = decode_scale(w.biases, w.scale_dtype, g);
    const float expected = q * s + b;  // f32 multiply, then add (no contraction in ISO C++ mode)
    ASSERT_EQ(got[j], expected) << "row " << r << " element " << j;
  }
}

TEST(QuantDequantize, AffineMatchesIndependentDecodeForEveryLayout) {
  std::mt19937 rng(3);
  for (int bits : kAllBits) {
    for (int gs : kAllGroups) {
      for (DType sd : {DType::BF16, DType::F16, DType::F32}) {
        SCOPED_TRACE("bits " + std::to_string(bits) + " group " + std::to_string(gs) + " " +
                     std::string(dtype_name(sd)));
        AffineFixture f = make_affine(3, 2 * 128, bits, gs, sd, rng);
        for (int64_t r = 0; r < 3; ++r) expect_row_matches_independent_decode(f.w, r);
      }
    }
  }
}

TEST(QuantDequantize, DenseFormatsWiden) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-4.0f, 4.0f);
  const int64_t rows = 2, cols = 37;
  std::vector<float> f32(rows * cols);
  for (auto& v : f32) v = uni(rng);
  std::vector<uint16_t> bf(rows * cols), hf(rows * cols);
  for (size_t i = 0; i < f32.size(); ++i) {
    bf[i] = f32_to_bf16(f32[i]);
    hf[i] = f32_to_f16(f32[i]);
  }
  WeightMatrix w;
  w.rows = rows;
  w.cols = cols;
  std::vector<float> out(cols);
  for (int64_t r = 0; r < rows; ++r) {
    w.format = WeightFormat::F32;
    w.data = f32.data();
    dequantize_row(w, r, out.data());
    for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(out[j], f32[r * cols + j]);
    w.format = WeightFormat::BF16;
    w.data = bf.data();
    dequantize_row(w, r, out.data());
    for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(out[j], decode_bf16(bf[r * cols + j]));
    w.format = WeightFormat::F16;
    w.data = hf.data();
    dequantize_row(w, r, out.data());
    for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(out[j], decode_f16(hf[r * cols + j]));
  }
  EXPECT_THROW(dequantize_row(w, rows, out.data()), Error);
}

// Reads one tensor of a safetensors file with an independent minimal parser.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

RawTensor read_tensor(const std::string& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  const auto meta = nlohmann::json::parse(header).at(name);
  RawTensor t;
  t.dtype = meta.at("dtype").get<std::string>();
  t.shape = meta.at("shape").get<std::vector<int64_t>>();
  const uint64_t begin = meta.at("data_offsets")[0].get<uint64_t>();
  const uint64_t end = meta.at("data_offsets")[1].get<uint64_t>();
  t.bytes.resize(end - begin);
  in.seekg(static_cast<std::streamoff>(8 + header_len + begin));
  in.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(end - begin));
  EXPECT_TRUE(in.good()) << name;
  return t;
}

TEST(QuantDequantize, GoldenEmbeddingRowsMatchIndependentDecode) {
  const std::string dir = std::string(SPECULA_TEST_DATA) + "/goldens/e4b-like-q4g64-mlx/model";
  std::ifstream cfg_in(dir + "/config.json");
  ASSERT_TRUE(cfg_in.good());
  const auto cfg = nlohmann::json::parse(cfg_in);
  const int bits = cfg.at("quantization").at("bits").get<int>();
  const int gs = cfg.at("quantization").at("group_size").get<int>();
  const std::string prefix = "language_model.model.embed_tokens.";
  const RawTensor weight = read_tensor(dir + "/model.safetensors", prefix + "weight");
  const RawTensor scales = read_tensor(dir + "/model.safetensors", prefix + "scales");
  const RawTensor biases = read_tensor(dir + "/model.safetensors", prefix + "biases");
  ASSERT_EQ(weight.dtype, "U32");
  ASSERT_EQ(scales.dtype, "BF16");
  ASSERT_EQ(biases.dtype, "BF16");
  const int64_t rows = weight.shape[0];
  const int64_t cols = weight.shape[1] * 32 / bits;
  ASSERT_EQ(scales.shape[1], cols / gs);

  WeightMatrix w;
  w.format = WeightFormat::Affine;
  w.rows = rows;
  w.cols = cols;
  w.bits = bits;
  w.group_size = gs;
  w.scale_dtype = DType::BF16;
  w.data = weight.bytes.data();
  w.scales = scales.bytes.data();
  w.biases = biases.bytes.data();
  for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{105}, rows - 1}) {
    expect_row_matches_independent_decode(w, r);
  }
  // Real weights are not degenerate: the decoded row has spread.
  std::vector<float> row(cols);
  dequantize_row(w, 2, row.data());
  float lo = row[0], hi = row[0];
  for (float v : row) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, hi);
}

TEST(QuantGather, GathersRowsAndRejectsOutOfRangeIds) {
  std::mt19937 rng(9);
  AffineFixture f = make_affine(5, 64, 4, 32, DType::BF16, rng);
  const int32_t ids[] = {4, 0, 4};
  std::vector<float> out(3 * 64), row(64);
  gather_rows(f.w, ids, 3, out.data());
  for (int i = 0; i < 3; ++i) {
    dequantize_row(f.w, ids[i], row.data());
    EXPECT_EQ(0, std::memcmp(out.data() + i * 64, row.data(), 64 * sizeof(float)));
  }
  for (int32_t bad : {5, -1, 1 << 30}) {
    const int32_t bad_ids[] = {1, bad};
    try {
      gather_rows(f.w, bad_ids, 2, out.data());
      FAIL() << "id " << bad << " accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("5 rows"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace specula
