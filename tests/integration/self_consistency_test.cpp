// Bitwise self-consistency of the target forward pass (docs/architecture.md §3, docs/gemma4.md §6)
// on every tiny synth preset, dense and 4-bit, with prompts 3x longer than the sliding window:
// one-shot prefill vs chunked prefill vs prefill + token-by-token decode, 1 vs 2 threads, rollback
// + re-feed (also across the ring's wrap point) — all compared with memcmp, never a tolerance;
// with f32 KV caches, and bf16 ones on the 4-bit tiny E4B (KV sharing, per-layer inputs).
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "specula/model/target_model.h"
#include "specula/synth/plan.h"
#include "specula/synth/presets.h"
#include "specula/synth/writer.h"
#include "specula/util/error.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

struct Variant {
  std::string preset;
  bool quantized;
  KvType kv_type = KvType::F32;
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.preset << (v.quantized ? " q4g64" : " bf16") << " kv " << kv_type_name(v.kv_type);
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  for (const auto& p : synth::presets()) {
    if (!p.tiny) continue;
    v.push_back({p.name, false});
    v.push_back({p.name, true});
    if (p.name == "tiny-e4b") {  // one variant per KV type beyond f32: CI time
      v.push_back({p.name, true, KvType::Bf16});
      v.push_back({p.name, true, KvType::Q8});
    }
  }
  return v;
}

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  std::string s = info.param.preset + (info.param.quantized ? "_q4g64" : "_bf16") +
                  (info.param.kv_type == KvType::F32 ? "" : std::string("_kv_") + kv_type_name(info.param.kv_type));
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

class SelfConsistency : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("specula_selfcons_" + variant_name({GetParam(), 0}) + "_" + std::to_string(::getpid()));
    synth::SynthOptions o;
    o.preset = GetParam().preset;
    o.seed = 7;
    if (GetParam().quantized) o.quant = QuantSpec{4, 64, "affine"};
    synth::write_checkpoint(synth::plan_target(o), dir_.string());
    model_ = TargetModel::load(dir_.string());
    window_ = model_->config().text.sliding_window;
    ASSERT_GT(window_, 0);
    // 3 windows + a few, deterministic pseudo-random ids (BOS first).
    const int64_t len = 3 * window_ + 5;
    prompt_.push_back(2);
    uint32_t s = 12345;
    while (static_cast<int64_t>(prompt_.size()) < len) {
      s = s * 1664525u + 1013904223u;
      prompt_.push_back(static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(model_->vocab_size())));
    }
  }
  void TearDown() override {
    model_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  TargetCache cache(int64_t reserve, int64_t max_chunk) const {
    CacheOptions o;
    o.rollback_reserve = reserve;
    o.max_chunk = max_chunk;
    o.kv_type = GetParam().kv_type;
    return TargetCache(model_->config(), o);
  }

  // Logits of every prompt position from one forward call with the given chunk size.
  std::vector<float> prefill_all(TargetCache& c, int64_t chunk, ThreadPool& pool) const {
    ForwardRequest r;
    r.rows = OutputRows::All;
    r.chunk = chunk;
    ForwardOutput out = model_->forward(c, prompt_, r, pool);
    return out.logits;
  }

  ForwardOutput feed(TargetCache& c, const int32_t* ids, int64_t n, ThreadPool& pool, bool hidden = false) const {
    ForwardRequest r;
    r.rows = OutputRows::All;
    r.hidden = hidden;
    return model_->forward(c, std::span<const int32_t>(ids, static_cast<size_t>(n)), r, pool);
  }

  bool same_row(const std::vector<float>& all, int64_t row, const float* got) const {
    const int64_t V = model_->vocab_size();
    return std::memcmp(all.data() + row * V, got, sizeof(float) * static_cast<size_t>(V)) == 0;
  }

  fs::path dir_;
  std::unique_ptr<TargetModel> model_;
  int64_t window_ = 0;
  std::vector<int32_t> prompt_;
};

TEST_P(SelfConsistency, ChunkedPrefillMatchesOneShot) {
  ThreadPool pool(1);
  const int64_t len = static_cast<int64_t>(prompt_.size());
  TargetCache big = cache(16, len);
  const std::vector<float> ref = prefill_all(big, len, pool);
  for (int64_t chunk : {1, 2, 3, 7}) {
    // Tight rings (reserve 2): the ring wraps several times during the prompt.
    TargetCache c = cache(2, chunk);
    const std::vector<float> got = prefill_all(c, chunk, pool);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), sizeof(float) * ref.size()), 0) << "chunk " << chunk;
  }
}

TEST_P(SelfConsistency, PrefillThenDecodeMatchesOneShot) {
  ThreadPool pool(1);
  const int64_t len = static_cast<int64_t>(prompt_.size());
  TargetCache big = cache(16, len);
  const std::vector<float> ref = prefill_all(big, len, pool);
  for (int64_t head : {int64_t{1}, window_ - 1, window_ + 1}) {
    TargetCache c = cache(16, window_ + 1);
    ForwardOutput first = feed(c, prompt_.data(), head, pool);
    for (int64_t r = 0; r < head; ++r) EXPECT_TRUE(same_row(ref, r, first.logits_row(static_cast<size_t>(r))));
    for (int64_t p = head; p < len; ++p) {
      ForwardOutput step = feed(c, prompt_.data() + p, 1, pool);
      ASSERT_TRUE(same_row(ref, p, step.logits_row(0))) << "head " << head << " position " << p;
    }
  }
}

TEST_P(SelfConsistency, OneAndTwoThreadsIdentical) {
  const int64_t len = static_cast<int64_t>(prompt_.size());
  ThreadPool one(1), two(2);
  TargetCache c1 = cache(16, len), c2 = cache(16, len);
  const std::vector<float> a = prefill_all(c1, len, one);
  const std::vector<float> b = prefill_all(c2, len, two);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0);
  // Decode steps too.
  ForwardOutput da = feed(c1, prompt_.data() + 3, 1, one, true);
  ForwardOutput db = feed(c2, prompt_.data() + 3, 1, two, true);
  EXPECT_EQ(std::memcmp(da.logits.data(), db.logits.data(), sizeof(float) * da.logits.size()), 0);
  EXPECT_EQ(std::memcmp(da.hidden.data(), db.hidden.data(), sizeof(float) * da.hidden.size()), 0);
}

TEST_P(SelfConsistency, RollbackAndRefeedReproducesBytes) {
  ThreadPool pool(1);
  const int64_t len = static_cast<int64_t>(prompt_.size());
  TargetCache big = cache(16, len);
  const std::vector<float> ref = prefill_all(big, len, pool);
  // Ring capacity W + 3: every offset past W + 3 has wrapped, so rollbacks cross the wrap point.
  const int64_t reserve = 3;
  TargetCache c = cache(reserve, reserve + 1);
  feed(c, prompt_.data(), 1, pool);
  for (int64_t p = 1; p < len; ++p) {
    ForwardOutput step = feed(c, prompt_.data() + p, 1, pool);
    ASSERT_TRUE(same_row(ref, p, step.logits_row(0)));
    const int64_t offset = p + 1;
    for (int64_t k = 1; k <= std::min(reserve, offset); ++k) {
      ASSERT_EQ(c.max_rollback() >= k, true) << "offset " << offset << " k " << k;
      c.rollback(k);
      ASSERT_EQ(c.offset(), offset - k);
      // Re-feed as one verify-like chunk of k rows.
      ForwardOutput again = feed(c, prompt_.data() + offset - k, k, pool);
      for (int64_t i = 0; i < k; ++i)
        ASSERT_TRUE(same_row(ref, offset - k + i, again.logits_row(static_cast<size_t>(i))))
            << "offset " << offset << " rollback " << k << " row " << i;
      ASSERT_EQ(c.offset(), offset);
    }
  }
  // Past the reserve the ring no longer holds the window: a clear error, nothing changed.
  ASSERT_GT(len, window_ + reserve + 1);
  try {
    c.rollback(reserve + 1);
    FAIL() << "rollback past the reserve was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollback reserve 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.offset(), len);
}

TEST_P(SelfConsistency, DrafterViewIsNewestWindowInOrder) {
  ThreadPool pool(1);
  const int64_t len = static_cast<int64_t>(prompt_.size());
  TargetCache big = cache(16, len);
  prefill_all(big, len, pool);
  TargetCache small = cache(2, 1);
  prefill_all(small, 1, pool);
  for (int layer = 0; layer < model_->config().text.num_hidden_layers; ++layer) {
    if (!small.owns(layer)) continue;
    const KvCache& a = big.for_layer(layer);
    const KvCache& b = small.for_layer(layer);
    const int64_t expect_begin = a.is_ring() ? len - window_ : 0;
    EXPECT_EQ(a.view_begin(), expect_begin);
    EXPECT_EQ(b.view_begin(), expect_begin);
    const auto row = static_cast<size_t>(a.row_bytes());
    std::vector<std::byte> ak(row), av(row), bk(row), bv(row);
    for (int64_t p = b.view_begin(); p < len; ++p) {
      a.read_stored(p, ak.data(), av.data());
      b.read_stored(p, bk.data(), bv.data());
      EXPECT_TRUE(ak == bk) << p;
      EXPECT_TRUE(av == bv) << p;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, SelfConsistency, ::testing::ValuesIn(variants()), variant_name);

}  // namespace
}  // namespace specula
