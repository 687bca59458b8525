// The bf16 KV cache: rows come back as the f32 rows rounded once to bf16 (nearest even), through
// every reader (read, the raw rows, a window copy restored into another ring), at half the bytes
// of an f32 cache; the q8 cache: codes and scales as kv_type.h defines them, read back exactly
// dequantized, restored by window copies, refused for head dims off its blocks; and the
// --kv-type names parse.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "specula/kernels/kv_type.h"
#include "specula/model/kv_cache.h"
#include "specula/util/alignment.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

// The geometry of the caches under test.
constexpr int64_t kCacheKvHeads = 2, kCacheHeadDim = 12;

// Random values plus ones that exercise the rounding: halfway cases (both parities), the largest
// finite float (rounds to infinity), a subnormal, signed zero, infinity.
std::vector<float> test_row(std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> r(static_cast<size_t>(kCacheKvHeads * kCacheHeadDim));
  for (float& x : r) x = nd(rng);
  r[0] = std::bit_cast<float>(0x3f808000u);  // halfway, even below: rounds down
  r[1] = std::bit_cast<float>(0x3f818000u);  // halfway, odd below: rounds up
  r[2] = std::numeric_limits<float>::max();
  r[3] = std::numeric_limits<float>::denorm_min() * 3.0f;
  r[4] = -0.0f;
  r[5] = -std::numeric_limits<float>::infinity();
  return r;
}

std::vector<uint16_t> rounded(const std::vector<float>& row) {
  std::vector<uint16_t> r(row.size());
  for (size_t i = 0; i < row.size(); ++i) r[i] = f32_to_bf16(row[i]);
  return r;
}

std::vector<float> widened(const std::vector<uint16_t>& row) {
  std::vector<float> r(row.size());
  for (size_t i = 0; i < row.size(); ++i) r[i] = bf16_to_f32(row[i]);
  return r;
}

bool same_bytes(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

// The stored K and V rows of position pos ([kv_head][head_dim]).
struct StoredRows {
  std::vector<std::byte> k, v;
  StoredRows(const KvCache& c, int64_t pos)
      : k(static_cast<size_t>(c.row_bytes())), v(static_cast<size_t>(c.row_bytes())) {
    c.read_stored(pos, k.data(), v.data());
  }
};

TEST(KvCacheType, Bf16RowsReadBackAsTheRoundedValues) {
  std::mt19937 rng(3);
  for (bool ring : {false, true}) {
    SCOPED_TRACE(ring ? "ring" : "full");
    KvCache c = ring ? KvCache::ring(kCacheKvHeads, kCacheHeadDim, 4, 3, KvType::Bf16)
                     : KvCache::full(kCacheKvHeads, kCacheHeadDim, 4, KvType::Bf16);
    EXPECT_EQ(c.row_bytes(), kCacheKvHeads * kCacheHeadDim * 2);
    std::vector<std::vector<float>> ks, vs;
    for (int64_t p = 0; p < 9; ++p) {
      ks.push_back(test_row(rng));
      vs.push_back(test_row(rng));
      c.reserve_write(1);
      c.write(p, ks.back().data(), vs.back().data());
      c.advance(1);
    }
    EXPECT_EQ(rounded(ks[0])[0], 0x3f80);
    EXPECT_EQ(rounded(ks[0])[1], 0x3f82);
    std::vector<float> k(ks[0].size()), v(k.size());
    for (int64_t p = c.view_begin(); p < c.offset(); ++p) {
      const auto i = static_cast<size_t>(p);
      const std::vector<uint16_t> want_k = rounded(ks[i]), want_v = rounded(vs[i]);
      const StoredRows stored(c, p);
      EXPECT_TRUE(same_bytes(stored.k.data(), want_k.data(), want_k.size() * 2)) << p;
      EXPECT_TRUE(same_bytes(stored.v.data(), want_v.data(), want_v.size() * 2)) << p;
      c.read(p, k.data(), v.data());
      EXPECT_TRUE(same_bytes(k.data(), widened(want_k).data(), k.size() * 4)) << p;
      EXPECT_TRUE(same_bytes(v.data(), widened(want_v).data(), v.size() * 4)) << p;
    }
  }
}

TEST(KvCacheType, F32RowsReadBackUnchanged) {
  std::mt19937 rng(4);
  KvCache c = KvCache::full(kCacheKvHeads, kCacheHeadDim);
  EXPECT_EQ(c.type(), KvType::F32);
  const std::vector<float> k = test_row(rng), v = test_row(rng);
  c.reserve_write(1);
  c.write(0, k.data(), v.data());
  c.advance(1);
  const StoredRows stored(c, 0);
  EXPECT_TRUE(same_bytes(stored.k.data(), k.data(), k.size() * 4));
  EXPECT_TRUE(same_bytes(stored.v.data(), v.data(), v.size() * 4));
}

// A full cache's default block fills one huge page, whatever the row size: at most a row of the
// page is left over.
TEST(KvCacheType, DefaultBlocksFillOneHugePage) {
  for (KvType type : {KvType::F32, KvType::Bf16, KvType::Q8}) {
    SCOPED_TRACE(kv_type_name(type));
    KvCache c = KvCache::full(2, 512, kKvBlockOfOneHugePage, type);
    c.reserve_write(1);
    const uint64_t row = 2 * kv_head_row_bytes(type, 512);
    const uint64_t block = c.allocated_bytes() / 2;  // the K block and the V block
    EXPECT_LE(block, kHugePage);
    EXPECT_GT(block + row, kHugePage);
    EXPECT_EQ(c.bytes_at(1), c.allocated_bytes());
    EXPECT_EQ(c.bytes_at(static_cast<int64_t>(block / row) + 1), 2 * c.allocated_bytes());
  }
  EXPECT_THROW((void)KvCache::full(2, 512, -1), Error);
}

TEST(KvCacheType, Bf16WindowCopyRestoresTheStoredRows) {
  std::mt19937 rng(5);
  const int64_t window = 4, extra = 2;
  KvCache a = KvCache::ring(kCacheKvHeads, kCacheHeadDim, window, extra, KvType::Bf16);
  for (int64_t p = 0; p < 11; ++p) {
    const std::vector<float> k = test_row(rng), v = test_row(rng);
    a.reserve_write(1);
    a.write(p, k.data(), v.data());
    a.advance(1);
  }
  const KvCache::WindowCopy copy = a.copy_window(1);
  EXPECT_EQ(copy.k.size() + copy.v.size(), a.window_copy_bytes(11, 1));
  EXPECT_EQ(a.window_copy_bytes(11, 1) * 2,
            KvCache::ring(kCacheKvHeads, kCacheHeadDim, window, extra, KvType::F32).window_copy_bytes(11, 1));
  KvCache b = KvCache::ring(kCacheKvHeads, kCacheHeadDim, window, extra, KvType::Bf16);
  for (int64_t p = 0; p < 11; ++p) {  // other contents at the same offset
    const std::vector<float> k = test_row(rng), v = test_row(rng);
    b.reserve_write(1);
    b.write(p, k.data(), v.data());
    b.advance(1);
  }
  b.restore_window(copy, 11);
  for (int64_t p = b.view_begin(); p < 11; ++p) {
    const StoredRows sa(a, p), sb(b, p);
    EXPECT_TRUE(sa.k == sb.k) << p;
    EXPECT_TRUE(sa.v == sb.v) << p;
  }
  KvCache f32 = KvCache::ring(kCacheKvHeads, kCacheHeadDim, window, extra, KvType::F32);
  for (int64_t p = 0; p < 11; ++p) {
    f32.reserve_write(1);
    f32.advance(1);
  }
  EXPECT_FALSE(f32.can_restore(copy, 11)) << "a bf16 copy does not fit an f32 ring";
}

TEST(KvCacheType, Bf16HalvesTheBytes) {
  const KvCache f = KvCache::full(kCacheKvHeads, kCacheHeadDim, 8, KvType::F32);
  const KvCache h = KvCache::full(kCacheKvHeads, kCacheHeadDim, 8, KvType::Bf16);
  EXPECT_EQ(h.bytes_at(100) * 2, f.bytes_at(100));
  const KvCache fr = KvCache::ring(kCacheKvHeads, kCacheHeadDim, 16, 4, KvType::F32);
  const KvCache hr = KvCache::ring(kCacheKvHeads, kCacheHeadDim, 16, 4, KvType::Bf16);
  EXPECT_EQ(hr.bytes_at(100) * 2, fr.bytes_at(100));
}

TEST(KvCacheType, NamesParse) {
  EXPECT_EQ(parse_kv_type("f32"), KvType::F32);
  EXPECT_EQ(parse_kv_type("bf16"), KvType::Bf16);
  EXPECT_EQ(parse_kv_type("q8"), KvType::Q8);
  EXPECT_STREQ(kv_type_name(KvType::Bf16), "bf16");
  EXPECT_STREQ(kv_type_name(KvType::Q8), "q8");
  try {
    parse_kv_type("q4");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q4' is not one of 'f32', 'bf16', 'q8'"), std::string::npos) << e.what();
  }
}

// q8: codes and scales as kv_type.h defines them, on hand-checked blocks.
TEST(KvCacheType, Q8QuantizesEachBlockOfThirtyTwoWithItsOwnScale) {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;  // block 0: scale 1, codes exact
  x[1] = -3.4f;
  x[2] = 2.5f;  // halfway: nearest even
  x[3] = 3.5f;
  for (int i = 32; i < 64; ++i) x[static_cast<size_t>(i)] = 0.0f;  // block 1: all zero, scale 0
  std::vector<uint8_t> row(static_cast<size_t>(kv_head_row_bytes(KvType::Q8, 64)));
  EXPECT_EQ(row.size(), 64u + 4u);
  kv_q8_quantize_row(x.data(), 64, row.data());
  const auto* codes = reinterpret_cast<const int8_t*>(row.data());
  EXPECT_EQ(codes[0], 127);
  EXPECT_EQ(codes[1], -3);
  EXPECT_EQ(codes[2], 2);
  EXPECT_EQ(codes[3], 4);
  uint16_t scales[2];
  std::memcpy(scales, row.data() + 64, 4);
  EXPECT_EQ(scales[0], f32_to_bf16(1.0f));
  EXPECT_EQ(scales[1], 0);
  std::vector<float> back(64);
  kv_q8_dequantize_row(row.data(), 64, back.data());
  EXPECT_EQ(back[1], -3.0f);
  EXPECT_EQ(back[33], 0.0f);

  // A block whose largest magnitude is not a bf16 multiple of 127: every element within half a
  // step (plus the scale's rounding), none clipped past ±127.
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (float& v : x) v = nd(rng);
  kv_q8_quantize_row(x.data(), 64, row.data());
  kv_q8_dequantize_row(row.data(), 64, back.data());
  for (int b = 0; b < 2; ++b) {
    float amax = 0.0f;
    for (int i = 32 * b; i < 32 * b + 32; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(i)]));
    for (int i = 32 * b; i < 32 * b + 32; ++i)
      EXPECT_LE(std::fabs(back[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), amax / 127.0f * 0.52f) << i;
  }
}

TEST(KvCacheType, Q8RowsReadBackDequantizedAndWindowCopiesRestoreThem) {
  constexpr int64_t dim = 64;
  std::mt19937 rng(6);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  KvCache a = KvCache::ring(kCacheKvHeads, dim, 4, 2, KvType::Q8);
  EXPECT_EQ(a.row_bytes(), kCacheKvHeads * (dim + dim / 16));
  std::vector<std::vector<float>> ks;
  for (int64_t p = 0; p < 11; ++p) {
    std::vector<float> k(static_cast<size_t>(kCacheKvHeads * dim)), v(k.size());
    for (float& x : k) x = nd(rng);
    for (float& x : v) x = nd(rng);
    a.reserve_write(1);
    a.write(p, k.data(), v.data());
    a.advance(1);
    ks.push_back(k);
  }
  std::vector<float> k(static_cast<size_t>(kCacheKvHeads * dim)), v(k.size()), want(static_cast<size_t>(dim));
  std::vector<uint8_t> q(static_cast<size_t>(kv_head_row_bytes(KvType::Q8, dim)));
  for (int64_t p = a.view_begin(); p < a.offset(); ++p) {
    a.read(p, k.data(), v.data());
    for (int64_t h = 0; h < kCacheKvHeads; ++h) {
      kv_q8_quantize_row(ks[static_cast<size_t>(p)].data() + h * dim, dim, q.data());
      kv_q8_dequantize_row(q.data(), dim, want.data());
      EXPECT_TRUE(same_bytes(k.data() + h * dim, want.data(), want.size() * 4)) << p << " head " << h;
    }
  }
  const KvCache::WindowCopy copy = a.copy_window(1);
  KvCache b = KvCache::ring(kCacheKvHeads, dim, 4, 2, KvType::Q8);
  for (int64_t p = 0; p < 11; ++p) {
    b.reserve_write(1);
    b.advance(1);
  }
  b.restore_window(copy, 11);
  for (int64_t p = b.view_begin(); p < 11; ++p) {
    const StoredRows sa(a, p), sb(b, p);
    EXPECT_TRUE(sa.k == sb.k && sa.v == sb.v) << p;
  }
}

TEST(KvCacheType, Q8NeedsHeadDimsInBlocksOfThirtyTwo) {
  EXPECT_TRUE(kv_type_fits(KvType::Q8, 256));
  EXPECT_FALSE(kv_type_fits(KvType::Q8, 40));
  EXPECT_TRUE(kv_type_fits(KvType::Bf16, 40));
  try {
    (void)KvCache::full(2, 40, 8, KvType::Q8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache type q8 needs head dims that are multiples of 32; this model has a "
                                         "layer of head dim 40"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)KvCache::ring(2, 40, 8, 2, KvType::Q8), Error);
}

}  // namespace
}  // namespace specula
