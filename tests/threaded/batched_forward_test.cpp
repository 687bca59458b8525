// The batched forward's contract (model/target_model.h forward_batch): a row's logits and hidden
// state are the same bytes whatever other sequences, row counts and positions share its step, and
// whatever the thread count. Every tiny preset, dense and 4-bit, exact and fast precision: three
// sequences fed in irregular steps (prefill chunks beside single decode rows and verify-sized
// groups, sequences sitting steps out, rejected rows rolled back) against each sequence fed
// alone in one call — compared with memcmp.
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
  Precision precision;
};

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  std::string s =
      info.param.preset + (info.param.quantized ? "_q4g64_" : "_bf16_") + precision_name(info.param.precision);
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.preset << (v.quantized ? " q4g64 " : " bf16 ") << precision_name(v.precision);
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  for (const auto& p : synth::presets()) {
    if (!p.tiny) continue;
    v.push_back({p.name, false, Precision::Exact});
    v.push_back({p.name, true, Precision::Exact});
    v.push_back({p.name, true, Precision::Fast});
  }
  return v;
}

std::vector<int32_t> pseudo_random_tokens(int64_t n, uint32_t seed, int64_t vocab) {
  std::vector<int32_t> t{2};
  while (static_cast<int64_t>(t.size()) < n) {
    seed = seed * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(vocab)));
  }
  return t;
}

class BatchedForward : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("specula_batched_" + variant_name({GetParam(), 0}) + "_" + std::to_string(::getpid()));
    synth::SynthOptions o;
    o.preset = GetParam().preset;
    o.seed = 11;
    if (GetParam().quantized) o.quant = QuantSpec{4, 64, "affine"};
    synth::write_checkpoint(synth::plan_target(o), dir_.string());
    TargetOptions to;
    to.precision = GetParam().precision;
    to.prefill_chunk = 8;
    to.rollback_reserve = 4;
    model_ = TargetModel::load(dir_.string(), to);
  }
  void TearDown() override {
    model_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path dir_;
  std::unique_ptr<TargetModel> model_;
};

// The rows of every position, fed alone in one call on one thread.
ForwardOutput alone(const TargetModel& model, const std::vector<int32_t>& tokens) {
  ThreadPool pool(1);
  TargetCache cache = model.new_cache();
  ForwardRequest all;
  all.rows = OutputRows::All;
  all.hidden = true;
  return model.forward(cache, tokens, all, pool);
}

TEST_P(BatchedForward, RowsAreTheSameBytesWhateverShareTheStep) {
  const int64_t window = model_->config().text.sliding_window;
  const int64_t vocab = model_->vocab_size();
  // Longer than two windows, so the sliding rings wrap during the batched steps.
  const std::vector<std::vector<int32_t>> seqs = {pseudo_random_tokens(2 * window + 7, 1, vocab),
                                                  pseudo_random_tokens(2 * window + 2, 2, vocab),
                                                  pseudo_random_tokens(window + 5, 3, vocab)};
  std::vector<ForwardOutput> want;
  for (const auto& s : seqs) want.push_back(alone(*model_, s));

  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    ForwardScratch scratch;
    std::vector<TargetCache> caches;
    for (size_t i = 0; i < seqs.size(); ++i) caches.push_back(model_->new_cache());
    std::vector<int64_t> fed(seqs.size(), 0);
    // Per step and sequence: how many rows it feeds (0 = sits the step out), cycling; every third
    // step a sequence first feeds two wrong rows, which are rolled back after the step.
    const int64_t pattern[3][5] = {{8, 1, 1, 5, 1}, {1, 3, 0, 1, 8}, {0, 5, 1, 8, 2}};
    for (int64_t step = 0; step < 200; ++step) {
      std::vector<SequenceRows> batch;
      std::vector<size_t> who;
      std::vector<int64_t> extra;
      std::vector<std::vector<int32_t>> fed_tokens(seqs.size());
      for (size_t i = 0; i < seqs.size(); ++i) {
        const int64_t left = static_cast<int64_t>(seqs[i].size()) - fed[i];
        int64_t n = std::min(pattern[i][step % 5], left);
        if (n == 0) continue;
        const int64_t wrong = (step % 3 == static_cast<int64_t>(i) && n + 2 <= 8 && fed[i] > 0) ? 2 : 0;
        fed_tokens[i].assign(seqs[i].begin() + fed[i], seqs[i].begin() + fed[i] + n);
        for (int64_t w = 0; w < wrong; ++w) fed_tokens[i].push_back(static_cast<int32_t>((fed[i] + w * 7) % vocab));
        SequenceRows rows;
        rows.cache = &caches[i];
        rows.tokens = fed_tokens[i];
        rows.request.rows = OutputRows::All;
        rows.request.hidden = true;
        batch.push_back(rows);
        who.push_back(i);
        extra.push_back(wrong);
      }
      bool all_fed = true;
      for (size_t i = 0; i < seqs.size(); ++i) all_fed = all_fed && fed[i] == static_cast<int64_t>(seqs[i].size());
      if (all_fed) break;
      if (batch.empty()) continue;
      const std::vector<ForwardOutput> got = model_->forward_batch(batch, pool, &scratch);
      ASSERT_EQ(got.size(), batch.size());
      for (size_t b = 0; b < batch.size(); ++b) {
        const size_t i = who[b];
        const int64_t n = static_cast<int64_t>(batch[b].tokens.size()) - extra[b];
        for (int64_t r = 0; r < n; ++r) {
          const size_t at = static_cast<size_t>(fed[i] + r);
          ASSERT_EQ(std::memcmp(got[b].logits_row(static_cast<size_t>(r)), want[i].logits_row(at),
                                sizeof(float) * static_cast<size_t>(vocab)),
                    0)
              << "sequence " << i << " position " << at << " (step " << step << ", " << threads << " threads)";
          ASSERT_EQ(std::memcmp(got[b].hidden_row(static_cast<size_t>(r)), want[i].hidden_row(at),
                                sizeof(float) * static_cast<size_t>(model_->hidden_size())),
                    0)
              << "hidden: sequence " << i << " position " << at << " (step " << step << ")";
        }
        if (extra[b] > 0) caches[i].rollback(extra[b]);
        fed[i] += n;
        ASSERT_EQ(caches[i].offset(), fed[i]);
      }
    }
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(fed[i], static_cast<int64_t>(seqs[i].size()));
  }
}

TEST_P(BatchedForward, RejectsABadStepBeforeTouchingAnyCache) {
  ThreadPool pool(1);
  TargetCache a = model_->new_cache();
  TargetCache b = model_->new_cache();
  const std::vector<int32_t> ok = {2, 5, 6};
  const std::vector<int32_t> bad = {2, static_cast<int32_t>(model_->vocab_size())};
  const std::vector<int32_t> long_rows(9, 3);  // one past the cache's max_chunk of 8
  auto expect_error = [&](std::vector<SequenceRows> batch, const std::string& phrase) {
    try {
      model_->forward_batch(batch, pool);
      ADD_FAILURE() << "expected an error containing '" << phrase << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
    EXPECT_EQ(a.offset(), 0);
    EXPECT_EQ(b.offset(), 0);
  };
  expect_error({SequenceRows{&a, ok, {}}, SequenceRows{&b, bad, {}}}, "outside the vocabulary");
  expect_error({SequenceRows{&a, ok, {}}, SequenceRows{&a, ok, {}}}, "share one cache");
  expect_error({SequenceRows{&a, ok, {}}, SequenceRows{&b, long_rows, {}}}, "maximum chunk of 8");
  expect_error({SequenceRows{&a, ok, {}}, SequenceRows{nullptr, ok, {}}}, "has no cache");
  expect_error({}, "no sequences");
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, BatchedForward, ::testing::ValuesIn(variants()), variant_name);

}  // namespace
}  // namespace specula
