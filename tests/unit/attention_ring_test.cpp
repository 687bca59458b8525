// Ring-buffer (and block-grown) attention vs a deliberately plain double-precision reference over
// the full K/V history with an explicit window mask, at many offsets, chunk sizes and rollbacks;
// the KV storage is not touched before its rows are written. Every cache test runs for f32 and bf16
// rows; for bf16 the reference sees the rows rounded as the cache stores them.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "page_residency.h"
#include "specula/kernels/attention.h"
#include "specula/model/kv_cache.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 8;

struct History {
  // Every K/V row ever current for each position (a rollback rewrites positions).
  std::vector<std::vector<float>> k, v;  // [pos][kKvHeads*kDim]
};

std::vector<float> random_row(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> r(static_cast<size_t>(n));
  for (auto& x : r) x = d(rng);
  return r;
}

// The values a cache of `type` holds for `row`.
std::vector<float> as_stored(std::vector<float> row, KvType type) {
  if (type == KvType::Bf16)
    for (float& x : row) x = bf16_to_f32(f32_to_bf16(x));
  return row;
}

constexpr KvType kKvTypes[] = {KvType::F32, KvType::Bf16};

// Plain reference: for each query at position p, scores over ALL positions 0..p of the history,
// masked by an explicit window test, softmax and weighted sum in double.
std::vector<double> reference(const History& h, const std::vector<float>& q, int64_t p, int64_t window) {
  const int64_t group = kHeads / kKvHeads;
  std::vector<double> out(static_cast<size_t>(kHeads * kDim), 0.0);
  for (int64_t head = 0; head < kHeads; ++head) {
    const int64_t kvh = head / group;
    std::vector<double> s(static_cast<size_t>(p + 1));
    std::vector<bool> allow(static_cast<size_t>(p + 1));
    double m = -INFINITY;
    for (int64_t t = 0; t <= p; ++t) {
      allow[t] = window <= 0 || t > p - window;
      double dot = 0.0;
      for (int64_t j = 0; j < kDim; ++j)
        dot += static_cast<double>(q[head * kDim + j]) * static_cast<double>(h.k[t][kvh * kDim + j]);
      s[t] = dot;
      if (allow[t]) m = std::max(m, dot);
    }
    double sum = 0.0;
    for (int64_t t = 0; t <= p; ++t) {
      s[t] = allow[t] ? std::exp(s[t] - m) : 0.0;
      sum += s[t];
    }
    for (int64_t t = 0; t <= p; ++t)
      for (int64_t j = 0; j < kDim; ++j) out[head * kDim + j] += s[t] / sum * h.v[t][kvh * kDim + j];
  }
  return out;
}

// Writes `n` new positions (random rows, recorded in the history), runs the kernel for them and
// compares each query's output with the reference. Returns the kernel's outputs.
std::vector<float> step(KvCache& cache, History& h, std::mt19937& rng, int64_t n, int64_t window, ThreadPool& pool,
                        std::vector<float>* queries_out = nullptr, const std::vector<float>* queries_in = nullptr) {
  const int64_t pos0 = cache.offset();
  const int64_t row = kKvHeads * kDim;
  cache.reserve_write(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos0 + i;
    if (static_cast<int64_t>(h.k.size()) <= p) {
      h.k.resize(static_cast<size_t>(p + 1));
      h.v.resize(static_cast<size_t>(p + 1));
    }
    const std::vector<float> k = random_row(rng, row), v = random_row(rng, row);
    cache.write(p, k.data(), v.data());
    h.k[p] = as_stored(k, cache.type());
    h.v[p] = as_stored(v, cache.type());
  }
  std::vector<float> q = queries_in ? *queries_in : random_row(rng, n * kHeads * kDim);
  if (queries_out) *queries_out = q;
  std::vector<float> out(static_cast<size_t>(n * kHeads * kDim));
  AttentionParams ap;
  ap.heads = kHeads;
  ap.window = window;
  attention(q.data(), n, kHeads * kDim, pos0, cache.view(), ap, out.data(), kHeads * kDim, pool);
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<float> qi(q.begin() + i * kHeads * kDim, q.begin() + (i + 1) * kHeads * kDim);
    const std::vector<double> want = reference(h, qi, pos0 + i, window);
    for (int64_t j = 0; j < kHeads * kDim; ++j)
      EXPECT_NEAR(out[i * kHeads * kDim + j], want[j], 1e-5 * (1.0 + std::abs(want[j])))
          << "position " << pos0 + i << " element " << j;
  }
  cache.advance(n);
  return out;
}

TEST(AttentionRing, MatchesDoubleReferenceAtManyOffsets) {
  ThreadPool pool(2);
  for (KvType type : kKvTypes) {
    for (int64_t window : {1, 3, 5, 8}) {
      for (int64_t extra : {0, 2, 5}) {
        SCOPED_TRACE(kv_type_name(type));
        std::mt19937 rng(static_cast<uint32_t>(window * 31 + extra));
        KvCache cache = KvCache::ring(kKvHeads, kDim, window, extra, type);
        History h;
        // Chunk sizes cycle through 1 .. max_write so writes straddle the wrap point in every way.
        int64_t chunk = 1;
        while (cache.offset() < 6 * (window + extra) + 7) {
          step(cache, h, rng, chunk, window, pool);
          chunk = chunk % cache.max_write() + 1;
        }
      }
    }
  }
}

TEST(AttentionRing, FullCacheAcrossBlocks) {
  ThreadPool pool(1);
  for (KvType type : kKvTypes) {
    SCOPED_TRACE(kv_type_name(type));
    std::mt19937 rng(5);
    KvCache cache = KvCache::full(kKvHeads, kDim, /*block_positions=*/4, type);
    History h;
    for (int64_t chunk : {1, 3, 4, 7, 1, 1, 9, 2}) step(cache, h, rng, chunk, 0, pool);
    EXPECT_EQ(cache.offset(), 28);
    EXPECT_EQ(cache.allocated_bytes(), 7u * 2 * 4 * kKvHeads * kv_head_row_bytes(type, kDim));
  }
}

TEST(AttentionRing, RollbackThenRewriteAcrossWrap) {
  ThreadPool pool(1);
  for (KvType type : kKvTypes) {
    SCOPED_TRACE(kv_type_name(type));
    const int64_t window = 5, extra = 3;
    std::mt19937 rng(9);
    KvCache cache = KvCache::ring(kKvHeads, kDim, window, extra, type);
    History h;
    for (int round = 0; round < 40; ++round) {
      step(cache, h, rng, 1 + round % 4, window, pool);
      const int64_t k = 1 + round % 3;
      ASSERT_GE(cache.max_rollback(), std::min<int64_t>(k, cache.offset()));
      cache.rollback(std::min<int64_t>(k, cache.offset()));
      // Rewritten positions get new random rows; the reference sees the new history.
      step(cache, h, rng, 1 + round % 2, window, pool);
    }
  }
}

TEST(AttentionRing, DecodeAndChunkGiveIdenticalBytes) {
  ThreadPool pool(2);
  for (KvType type : kKvTypes) {
    SCOPED_TRACE(kv_type_name(type));
    const int64_t window = 4, extra = 4;
    // Same K/V rows and queries, fed as one chunk of 5 vs five single steps.
    KvCache a = KvCache::ring(kKvHeads, kDim, window, extra, type);
    KvCache b = KvCache::ring(kKvHeads, kDim, window, extra, type);
    History ha, hb;
    std::mt19937 rng_a(11), rng_b(11);
    for (int i = 0; i < 3; ++i) {  // the same 9-position prefix in both
      step(a, ha, rng_a, 3, window, pool);
      step(b, hb, rng_b, 3, window, pool);
    }
    std::vector<float> q;
    const int64_t n = 5;
    const int64_t row = kKvHeads * kDim;
    // Chunk in a.
    std::mt19937 rows_rng(21);
    std::vector<std::vector<float>> ks, vs;
    for (int64_t i = 0; i < n; ++i) {
      ks.push_back(random_row(rows_rng, row));
      vs.push_back(random_row(rows_rng, row));
    }
    q = random_row(rows_rng, n * kHeads * kDim);
    AttentionParams ap;
    ap.heads = kHeads;
    ap.window = window;
    a.reserve_write(n);
    for (int64_t i = 0; i < n; ++i) a.write(9 + i, ks[i].data(), vs[i].data());
    std::vector<float> out_a(static_cast<size_t>(n * kHeads * kDim));
    attention(q.data(), n, kHeads * kDim, 9, a.view(), ap, out_a.data(), kHeads * kDim, pool);
    std::vector<float> out_b(out_a.size());
    for (int64_t i = 0; i < n; ++i) {
      b.reserve_write(1);
      b.write(9 + i, ks[i].data(), vs[i].data());
      ThreadPool one(1);
      attention(q.data() + i * kHeads * kDim, 1, kHeads * kDim, 9 + i, b.view(), ap, out_b.data() + i * kHeads * kDim,
                kHeads * kDim, one);
      b.advance(1);
    }
    EXPECT_EQ(std::memcmp(out_a.data(), out_b.data(), sizeof(float) * out_a.size()), 0);
  }
}

TEST(AttentionRing, ARestoredWindowCopyServesAttentionAfterTheRingMovedOn) {
  ThreadPool pool(1);
  for (KvType type : kKvTypes) {
    SCOPED_TRACE(kv_type_name(type));
    const int64_t window = 5, extra = 3;
    std::mt19937 rng(11);
    KvCache cache = KvCache::ring(kKvHeads, kDim, window, extra, type);
    History h;
    for (int64_t chunk : {3, 4, 3, 2}) step(cache, h, rng, chunk, window, pool);
    const KvCache::WindowCopy copy = cache.copy_window(2);  // positions [5, 12): back to 10..12
    EXPECT_EQ(copy.begin, 5);
    EXPECT_EQ(copy.offset, 12);
    EXPECT_EQ(copy.earliest(window), 10);
    EXPECT_EQ(copy.k.size() * 2, cache.window_copy_bytes(12, 2));
    for (int i = 0; i < 6; ++i) step(cache, h, rng, 2, window, pool);
    ASSERT_EQ(cache.offset(), 24);
    EXPECT_LT(cache.max_rollback(), 14) << "the ring has overwritten the window of offset 10";
    EXPECT_FALSE(cache.can_restore(copy, 9)) << "before the copy's reach";
    EXPECT_THROW(cache.restore_window(copy, 9), Error);
    cache.restore_window(copy, 10);
    EXPECT_EQ(cache.offset(), 10);
    EXPECT_EQ(cache.max_rollback(), 0);
    // New rows from offset 10 on, each query checked against the reference over the restored window.
    for (int64_t chunk : {1, 3, 2}) step(cache, h, rng, chunk, window, pool);
    KvCache other = KvCache::ring(kKvHeads, kDim, window, extra, type);
    EXPECT_FALSE(other.can_restore(copy, 12)) << "nothing cached there yet";
    EXPECT_THROW(other.restore_window(copy, 12), Error);
    KvCache full = KvCache::full(kKvHeads, kDim, 256, type);
    EXPECT_EQ(full.window_copy_bytes(12, 2), 0u);
  }
}

TEST(KvCacheStorage, IsNotTouchedBeforeItsRowsAreWritten) {
  // A 64 MiB ring (above malloc's largest mmap threshold, so fresh pages): writing position 0
  // touches its first rows only; zeroing it all up front cost ~200 ms of an E4B's first forward.
  KvCache ring = KvCache::ring(8, 512, 2048, 2048);
  ring.reserve_write(1);
  const std::vector<float> zeros(static_cast<size_t>(ring.row_elements()), 0.0f);
  ring.write(0, zeros.data(), zeros.data());
  ring.advance(1);
  const KvStoreView view = ring.view();
  for (int64_t h = 0; h < ring.kv_heads(); ++h) {
    EXPECT_TRUE(page_present(view.k_row(0, h))) << h;
    EXPECT_FALSE(page_present(view.k_row(ring.capacity() / 2, h))) << h;
    EXPECT_FALSE(page_present(view.v_row(ring.capacity() / 2, h))) << h;
  }
}

TEST(KvCacheErrors, MessagesNameTheLimits) {
  KvCache ring = KvCache::ring(1, 4, 4, 2);
  EXPECT_EQ(ring.max_write(), 3);
  try {
    ring.reserve_write(4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the sliding-window ring's limit of 3"), std::string::npos)
        << e.what();
  }
  for (int i = 0; i < 10; ++i) {
    ring.reserve_write(1);
    ring.advance(1);
  }
  EXPECT_EQ(ring.max_rollback(), 2);
  try {
    ring.rollback(3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keeps only 2 positions of rollback history"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ring.offset(), 10);
  EXPECT_EQ(ring.view_begin(), 6);
  float k[4], v[4];
  EXPECT_NO_THROW(ring.read(6, k, v));
  try {
    ring.read(3, k, v);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 3 is not readable (retained positions are [4, 10))"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ring.read(10, k, v), Error);
  KvCache full = KvCache::full(1, 4);
  try {
    full.rollback(1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot roll back 1 positions, only 0 are cached"), std::string::npos);
  }
}

}  // namespace
}  // namespace specula
