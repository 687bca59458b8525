// attention() gives the same bytes with the AVX2 and AVX-512 kernels as with the
// portable loops, and for any thread count (which regroups the query heads of a GQA group), over
// ring-wrapped and block-split K/V stores, head dims with and without a 16-lane tail, and GQA
// groups wider than the kernels' register blocks; and over a bf16 (q8) store, the bytes of the
// same attention over an f32 store holding the bf16 (dequantized) values.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "same_bytes.h"
#include "specula/kernels/attention.h"
#include "specula/kernels/isa.h"

namespace specula {
namespace {

using test::same_bytes;

struct Shape {
  int64_t heads, kv_heads, dim;
  int64_t block_rows, wrap;  // wrap 0 = linear
  int64_t window;
};

// A K/V store of `physical` rows in blocks of block_rows ([kv_head][row][dim]), filled with random values whose scale
// varies by row (so the softmax weights spread over many orders of magnitude).
struct Store {
  std::vector<std::vector<float>> k, v;
  std::vector<const void*> kp, vp;
  KvStoreView view;

  Store(const Shape& s, int64_t physical, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t row = s.kv_heads * s.dim;
    const int64_t blocks = (physical + s.block_rows - 1) / s.block_rows;
    for (int64_t b = 0; b < blocks; ++b) {
      k.emplace_back(static_cast<size_t>(s.block_rows * row));
      v.emplace_back(static_cast<size_t>(s.block_rows * row));
      for (size_t i = 0; i < k.back().size(); ++i) {
        const float scale = 1.0f + static_cast<float>(i / static_cast<size_t>(s.dim) % 5);  // by position
        k.back()[i] = nd(rng) * scale;
        v.back()[i] = nd(rng);
      }
      kp.push_back(k.back().data());
      vp.push_back(v.back().data());
    }
    view.k_blocks = kp.data();
    view.v_blocks = vp.data();
    view.block_rows = s.block_rows;
    view.wrap = s.wrap;
    view.kv_heads = s.kv_heads;
    view.head_dim = s.dim;
  }
};

// The same store's rows in another KV type (`stored`: kept as `type`; `widened`: the stored values
// turned back into f32, the reference's input). q8 needs head dims that are multiples of 32.
struct TypedStores {
  std::vector<std::vector<std::byte>> k, v;
  std::vector<std::vector<float>> wk, wv;
  std::vector<const void*> kp, vp, wkp, wvp;
  KvStoreView stored, widened;

  TypedStores(const Store& st, KvType type) : stored(st.view), widened(st.view) {
    const int64_t dim = st.view.head_dim;
    const auto row_bytes = static_cast<size_t>(kv_head_row_bytes(type, dim));
    auto convert = [&](const std::vector<float>& in, std::vector<std::byte>& out, std::vector<float>& wide) {
      const size_t rows = in.size() / static_cast<size_t>(dim);
      out.resize(rows * row_bytes);
      wide.resize(in.size());
      for (size_t r = 0; r < rows; ++r) {
        kv_row_from_f32(type, in.data() + r * static_cast<size_t>(dim), dim, out.data() + r * row_bytes);
        kv_row_to_f32(type, out.data() + r * row_bytes, dim, wide.data() + r * static_cast<size_t>(dim));
      }
    };
    for (size_t b = 0; b < st.k.size(); ++b) {
      convert(st.k[b], k.emplace_back(), wk.emplace_back());
      convert(st.v[b], v.emplace_back(), wv.emplace_back());
    }
    for (size_t b = 0; b < k.size(); ++b) {
      kp.push_back(k[b].data());
      vp.push_back(v[b].data());
      wkp.push_back(wk[b].data());
      wvp.push_back(wv[b].data());
    }
    stored.k_blocks = kp.data();
    stored.v_blocks = vp.data();
    stored.type = type;
    widened.k_blocks = wkp.data();
    widened.v_blocks = wvp.data();
  }
};

std::vector<float> run_attention(const Shape& s, const KvStoreView& kv, const std::vector<float>& q, int64_t rows,
                                 int64_t first_position, Isa isa, int threads) {
  set_active_isa(isa);
  ThreadPool pool(threads);
  AttentionParams p;
  p.heads = s.heads;
  p.window = s.window;
  p.scale = 0.75f;
  std::vector<float> out(q.size(), -1.0f);
  const int64_t ld = s.heads * s.dim;
  attention(q.data(), rows, ld, first_position, kv, p, out.data(), ld, pool);
  set_active_isa(detected_isa());
  return out;
}

// Every kernel set this CPU can run: the portable loops, AVX2, AVX-512.
std::vector<Isa> kernel_sets() {
  std::vector<Isa> sets;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa <= detected_isa()) sets.push_back(isa);
  return sets;
}

const Shape kShapes[] = {
    {8, 2, 256, 64, 0, 0},   // E4B sliding-layer geometry, linear store
    {8, 2, 512, 32, 0, 0},   // full-attention head dim
    {4, 4, 40, 16, 48, 24},  // no GQA, dim with a 8-lane tail, ring store with a window
    {4, 2, 80, 16, 0, 0},    // two 32-element chunks and a 16-element last chunk (bf16 stored in order)
    {20, 1, 24, 8, 0, 0},    // one KV head for 20 query heads (> 16 per slice, > 4 per V block)
    {6, 3, 7, 5, 40, 20},    // dim below one vector
};

TEST(AttentionIsa, AttentionSameBytesForEveryKernelAndThreadCount) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(testing::Message() << "heads " << s.heads << " kv " << s.kv_heads << " dim " << s.dim);
    const int64_t positions = 70;
    const Store st(s, s.wrap > 0 ? s.wrap : positions, rng);
    // Decode-like (1 row) and chunk-like (several rows) queries. Both kernels read the same
    // physical rows for a position, so a ring's contents need not be a real history here.
    for (const auto& [rows, first] : {std::pair<int64_t, int64_t>{1, 0}, {1, 37}, {5, 60}, {13, 0}}) {
      std::vector<float> q(static_cast<size_t>(rows * s.heads * s.dim));
      for (float& x : q) x = nd(rng);
      const std::vector<float> want = run_attention(s, st.view, q, rows, first, Isa::Scalar, 1);
      EXPECT_TRUE(same_bytes(want, run_attention(s, st.view, q, rows, first, Isa::Scalar, 3))) << "rows " << rows;
      for (Isa isa : kernel_sets()) {
        for (int threads : {1, 2, 3, 5}) {
          EXPECT_TRUE(same_bytes(want, run_attention(s, st.view, q, rows, first, isa, threads)))
              << "rows " << rows << " at " << first << ", " << isa_name(isa) << ", " << threads << " threads";
        }
      }
    }
  }
}

TEST(AttentionIsa, Bf16StoreGivesTheBytesOfItsValuesInF32ForEveryKernelAndThreadCount) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(testing::Message() << "heads " << s.heads << " kv " << s.kv_heads << " dim " << s.dim);
    const int64_t positions = 70;
    const Store st(s, s.wrap > 0 ? s.wrap : positions, rng);
    const TypedStores b(st, KvType::Bf16);
    for (const auto& [rows, first] : {std::pair<int64_t, int64_t>{1, 37}, {5, 60}, {13, 0}}) {
      std::vector<float> q(static_cast<size_t>(rows * s.heads * s.dim));
      for (float& x : q) x = nd(rng);
      const std::vector<float> want = run_attention(s, b.widened, q, rows, first, Isa::Scalar, 1);
      EXPECT_FALSE(same_bytes(want, run_attention(s, st.view, q, rows, first, Isa::Scalar, 1)))
          << "the rounding changes the result";
      for (Isa isa : kernel_sets()) {
        for (int threads : {1, 3}) {
          EXPECT_TRUE(same_bytes(want, run_attention(s, b.stored, q, rows, first, isa, threads)))
              << "rows " << rows << " at " << first << ", " << isa_name(isa) << ", " << threads << " threads";
        }
      }
    }
  }
}

TEST(AttentionIsa, Q8StoreGivesTheBytesOfItsDequantizedValuesForEveryKernelAndThreadCount) {
  std::mt19937 rng(10);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  int shapes = 0;
  for (const Shape& s : kShapes) {
    if (!kv_type_fits(KvType::Q8, s.dim)) continue;
    ++shapes;
    SCOPED_TRACE(testing::Message() << "heads " << s.heads << " kv " << s.kv_heads << " dim " << s.dim);
    const int64_t positions = 70;
    const Store st(s, s.wrap > 0 ? s.wrap : positions, rng);
    const TypedStores q(st, KvType::Q8);
    for (const auto& [rows, first] : {std::pair<int64_t, int64_t>{1, 37}, {5, 60}, {13, 0}}) {
      std::vector<float> query(static_cast<size_t>(rows * s.heads * s.dim));
      for (float& x : query) x = nd(rng);
      const std::vector<float> want = run_attention(s, q.widened, query, rows, first, Isa::Scalar, 1);
      EXPECT_FALSE(same_bytes(want, run_attention(s, st.view, query, rows, first, Isa::Scalar, 1)))
          << "the quantization changes the result";
      for (Isa isa : kernel_sets()) {
        for (int threads : {1, 3}) {
          EXPECT_TRUE(same_bytes(want, run_attention(s, q.stored, query, rows, first, isa, threads)))
              << "rows " << rows << " at " << first << ", " << isa_name(isa) << ", " << threads << " threads";
        }
      }
    }
  }
  EXPECT_GE(shapes, 2);
}

TEST(AttentionIsa, WorkSplitGivesEveryThreadWork) {
  auto split = [](int64_t rows, int64_t kv_heads, int64_t group, int threads) {
    const AttentionWorkSplit s = attention_work_split(rows, kv_heads, group, threads);
    return std::pair<int64_t, int64_t>{s.rows, s.heads};
  };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(split(1, 2, 4, 2), P(1, 4));   // decode, 2 KV heads, 2 threads: whole groups
  EXPECT_EQ(split(1, 1, 4, 2), P(1, 2));   // one KV head: the group in halves
  EXPECT_EQ(split(1, 1, 4, 16), P(1, 1));  // never below one head
  EXPECT_EQ(split(1, 2, 8, 8), P(1, 2));
  EXPECT_EQ(split(5, 1, 5, 2), P(3, 5));    // verify of 5 rows, one KV head: rows 3 + 2
  EXPECT_EQ(split(4, 2, 4, 2), P(4, 4));    // verify of 4 rows: one item per KV head
  EXPECT_EQ(split(9, 2, 4, 2), P(5, 4));    // at most 8 rows an item, near-equal blocks
  EXPECT_EQ(split(512, 2, 4, 2), P(8, 4));  // prefill
}

}  // namespace
}  // namespace specula
