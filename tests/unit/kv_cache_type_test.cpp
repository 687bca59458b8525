// The bf16 KV cache: rows come back as the f32 rows rounded once to bf16 (nearest even), through
// every reader (read, the raw rows, a window copy restored into another ring), at half the bytes
// of an f32 cache; and the --kv-type names parse.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "specula/kernels/kv_type.h"
#include "specula/model/kv_cache.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

constexpr int64_t kKvHeads = 2, kDim = 12;

// Random values plus ones that exercise the rounding: halfway cases (both parities), the largest
// finite float (rounds to infinity), a subnormal, signed zero, infinity.
std::vector<float> test_row(std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> r(static_cast<size_t>(kKvHeads * kDim));
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
    KvCache c =
        ring ? KvCache::ring(kKvHeads, kDim, 4, 3, KvType::Bf16) : KvCache::full(kKvHeads, kDim, 4, KvType::Bf16);
    EXPECT_EQ(c.row_bytes(), kKvHeads * kDim * 2);
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
  KvCache c = KvCache::full(kKvHeads, kDim);
  EXPECT_EQ(c.type(), KvType::F32);
  const std::vector<float> k = test_row(rng), v = test_row(rng);
  c.reserve_write(1);
  c.write(0, k.data(), v.data());
  c.advance(1);
  const StoredRows stored(c, 0);
  EXPECT_TRUE(same_bytes(stored.k.data(), k.data(), k.size() * 4));
  EXPECT_TRUE(same_bytes(stored.v.data(), v.data(), v.size() * 4));
}

TEST(KvCacheType, Bf16WindowCopyRestoresTheStoredRows) {
  std::mt19937 rng(5);
  const int64_t window = 4, extra = 2;
  KvCache a = KvCache::ring(kKvHeads, kDim, window, extra, KvType::Bf16);
  for (int64_t p = 0; p < 11; ++p) {
    const std::vector<float> k = test_row(rng), v = test_row(rng);
    a.reserve_write(1);
    a.write(p, k.data(), v.data());
    a.advance(1);
  }
  const KvCache::WindowCopy copy = a.copy_window(1);
  EXPECT_EQ(copy.k.size() + copy.v.size(), a.window_copy_bytes(11, 1));
  EXPECT_EQ(a.window_copy_bytes(11, 1) * 2,
            KvCache::ring(kKvHeads, kDim, window, extra, KvType::F32).window_copy_bytes(11, 1));
  KvCache b = KvCache::ring(kKvHeads, kDim, window, extra, KvType::Bf16);
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
  KvCache f32 = KvCache::ring(kKvHeads, kDim, window, extra, KvType::F32);
  for (int64_t p = 0; p < 11; ++p) {
    f32.reserve_write(1);
    f32.advance(1);
  }
  EXPECT_FALSE(f32.can_restore(copy, 11)) << "a bf16 copy does not fit an f32 ring";
}

TEST(KvCacheType, Bf16HalvesTheBytes) {
  const KvCache f = KvCache::full(kKvHeads, kDim, 8, KvType::F32);
  const KvCache h = KvCache::full(kKvHeads, kDim, 8, KvType::Bf16);
  EXPECT_EQ(h.bytes_at(100) * 2, f.bytes_at(100));
  const KvCache fr = KvCache::ring(kKvHeads, kDim, 16, 4, KvType::F32);
  const KvCache hr = KvCache::ring(kKvHeads, kDim, 16, 4, KvType::Bf16);
  EXPECT_EQ(hr.bytes_at(100) * 2, fr.bytes_at(100));
}

TEST(KvCacheType, NamesParse) {
  EXPECT_EQ(parse_kv_type("f32"), KvType::F32);
  EXPECT_EQ(parse_kv_type("bf16"), KvType::Bf16);
  EXPECT_STREQ(kv_type_name(KvType::Bf16), "bf16");
  try {
    parse_kv_type("q8");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q8' is not one of 'f32', 'bf16'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specula
