// Drafter::step_batch: the draft steps of several sequences in one call are, row by row, the bytes
// each sequence's steps give alone (tokens, positions, post_projection, every candidate id and
// score) — whatever other sequences, round indices k and row order share the call, on 1 and 2
// threads, for every golden case (centroid and dense heads) and both conventions.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "spec_golden_util.h"
#include "specula/kernels/softmax.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using spec_test::golden_case_names;
using spec_test::golden_root;

struct BatchCase {
  std::string name;
  DrafterConvention convention;
};

std::vector<BatchCase> batch_cases() {
  std::vector<BatchCase> out;
  for (const auto& c : golden_case_names())
    for (DrafterConvention conv : {DrafterConvention::Ollama, DrafterConvention::MlxBun}) out.push_back({c, conv});
  return out;
}

// A sequence prefilled with its own prompt: the token its first draft step extends and the
// target's final-norm hidden state of the last prompt row.
struct Sequence {
  TargetCache cache;
  int32_t pending = 0;
  std::vector<float> hidden;
};

Sequence prefill(const TargetModel& model, const std::vector<int32_t>& prompt, ThreadPool& pool) {
  Sequence s{model.new_cache(), 0, {}};
  ForwardRequest req;
  req.rows = OutputRows::Last;
  req.hidden = true;
  const ForwardOutput out = model.forward(s.cache, prompt, req, pool);
  s.pending = static_cast<int32_t>(argmax(out.logits_row(0), out.vocab_size));
  s.hidden.assign(out.hidden_row(0), out.hidden_row(0) + out.hidden_size);
  return s;
}

void expect_same_bytes(const DraftStep& got, const DraftStep& want, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.position, want.position);
  ASSERT_EQ(got.post_projection.size(), want.post_projection.size());
  EXPECT_EQ(
      std::memcmp(got.post_projection.data(), want.post_projection.data(), sizeof(float) * want.post_projection.size()),
      0);
  ASSERT_EQ(got.candidate_ids, want.candidate_ids);
  ASSERT_EQ(got.candidate_scores.size(), want.candidate_scores.size());
  EXPECT_EQ(std::memcmp(got.candidate_scores.data(), want.candidate_scores.data(),
                        sizeof(float) * want.candidate_scores.size()),
            0);
}

class DrafterBatch : public ::testing::TestWithParam<BatchCase> {};

TEST_P(DrafterBatch, EveryRowIsTheBytesOfItsSequenceAlone) {
  const auto dir = golden_root() / GetParam().name;
  auto model = TargetModel::load((dir / "model").string());
  auto drafter = Drafter::load((dir / "drafter").string(), *model, GetParam().convention);
  const auto vocab = static_cast<int32_t>(model->vocab_size());
  // Prompts of different lengths (past the small goldens' sliding windows, so rings have wrapped).
  std::vector<std::vector<int32_t>> prompts;
  for (int len : {3, 9, 17}) {
    std::vector<int32_t> p{2};
    for (int i = 1; i < len; ++i) p.push_back((i * 37 + len * 11) % (vocab - 3) + 3);
    prompts.push_back(p);
  }
  constexpr int kSteps = 4;
  // Sequence s joins the batches at round kStart[s] and drafts kCount[s] steps.
  const int kStart[3] = {0, 1, 0};
  const int kCount[3] = {4, 4, 3};

  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ThreadPool pool(threads);
    std::vector<Sequence> seqs;
    for (const auto& p : prompts) seqs.push_back(prefill(*model, p, pool));

    // Alone: each sequence's chain of steps, one call per step.
    std::vector<std::vector<DraftStep>> alone(seqs.size());
    for (size_t s = 0; s < seqs.size(); ++s) {
      int32_t t = seqs[s].pending;
      std::vector<float> g = seqs[s].hidden;
      for (int k = 0; k < kCount[s]; ++k) {
        alone[s].push_back(drafter->step(t, g.data(), seqs[s].cache, k, pool));
        t = alone[s].back().token;
        g = alone[s].back().post_projection;
      }
    }

    // Batched: every round one call over the sequences drafting then, in turning order.
    std::vector<int32_t> token(seqs.size());
    std::vector<std::vector<float>> hidden(seqs.size());
    for (size_t s = 0; s < seqs.size(); ++s) {
      token[s] = seqs[s].pending;
      hidden[s] = seqs[s].hidden;
    }
    for (int round = 0; round < kSteps + 1; ++round) {
      std::vector<size_t> who;
      for (size_t s = 0; s < seqs.size(); ++s) {
        const int k = round - kStart[s];
        if (k >= 0 && k < kCount[s]) who.push_back(s);
      }
      if (round % 2 == 1) std::reverse(who.begin(), who.end());
      std::vector<DraftRow> rows;
      for (size_t s : who)
        rows.push_back(DraftRow{token[s], hidden[s].data(), &seqs[s].cache, static_cast<int64_t>(round - kStart[s])});
      const std::vector<DraftStep> got = drafter->step_batch(rows, pool);
      ASSERT_EQ(got.size(), who.size());
      for (size_t i = 0; i < who.size(); ++i) {
        const size_t s = who[i];
        const int k = round - kStart[s];
        expect_same_bytes(got[i], alone[s][static_cast<size_t>(k)],
                          "sequence " + std::to_string(s) + " step " + std::to_string(k) + " of a call of " +
                              std::to_string(who.size()));
        token[s] = got[i].token;
        hidden[s] = got[i].post_projection;
      }
    }
  }
}

TEST(DrafterBatchErrors, ABadRowOrNoRowFailsTheCall) {
  const auto dir = golden_root() / "e4b-like-q4g64-mlx";
  auto model = TargetModel::load((dir / "model").string());
  auto drafter = Drafter::load((dir / "drafter").string(), *model);
  ThreadPool pool(1);
  Sequence s = prefill(*model, {2, 5, 7}, pool);
  TargetCache empty = model->new_cache();
  const DraftRow good{s.pending, s.hidden.data(), &s.cache, 0};
  const auto vocab = static_cast<int32_t>(model->vocab_size());
  EXPECT_THROW(drafter->step_batch(std::vector<DraftRow>{good, DraftRow{vocab, s.hidden.data(), &s.cache, 0}}, pool),
               Error);
  EXPECT_THROW(drafter->step_batch(std::vector<DraftRow>{good, DraftRow{s.pending, s.hidden.data(), &empty, 0}}, pool),
               Error);
  EXPECT_THROW(drafter->step_batch(std::vector<DraftRow>{}, pool), Error);
}

INSTANTIATE_TEST_SUITE_P(Goldens, DrafterBatch, ::testing::ValuesIn(batch_cases()),
                         [](const ::testing::TestParamInfo<BatchCase>& info) {
                           return spec_test::param_name(info.param.name) + "_" +
                                  (info.param.convention == DrafterConvention::Ollama ? "ollama" : "mlxbun");
                         });

}  // namespace
}  // namespace specula
