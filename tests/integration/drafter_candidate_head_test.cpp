// The candidate head built at load for a dense-head drafter (DrafterHead::Clusters,
// model/drafter.h): a step scores the built clusters' best tokens with the stored head's own
// scores, speculative output still equals plain output, a centroid-head drafter keeps its own
// head, and `run --draft-head` names the head and refuses unknown settings.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "drafter_golden_setup.h"
#include "specula/model/drafter.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using spec_test::golden_prompt;
using spec_test::kCentroidHead;
using spec_test::kDenseHead;
using spec_test::load_golden_drafter;
using spec_test::load_golden_target;

TEST(DrafterCandidateHead, SettingsParseAndUnknownOnesAreNamed) {
  for (DrafterHead h : {DrafterHead::Stored, DrafterHead::Clusters})
    EXPECT_EQ(parse_drafter_head(drafter_head_name(h)), h);
  try {
    parse_drafter_head("centroid");
    FAIL() << "centroid was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'centroid'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'stored' or 'clusters'"), std::string::npos) << e.what();
  }
}

TEST(DrafterCandidateHead, BuiltOnlyForDenseHeads) {
  auto dense_target = load_golden_target(kDenseHead, Precision::Fast);
  const auto stored = load_golden_drafter(kDenseHead, *dense_target, DrafterQuant::Auto, DrafterHead::Stored);
  EXPECT_FALSE(stored->candidate_head());
  EXPECT_EQ(drafter_head_note(*stored), "dense head");
  const auto built = load_golden_drafter(kDenseHead, *dense_target, DrafterQuant::Auto, DrafterHead::Clusters);
  EXPECT_TRUE(built->candidate_head());
  EXPECT_TRUE(built->built_head());
  EXPECT_EQ(built->clusters(), 4);  // 512 tokens in clusters of 128
  EXPECT_EQ(drafter_head_note(*built), "candidate head of 4 clusters built at load");

  auto centroid_target = load_golden_target(kCentroidHead, Precision::Fast);
  const auto own = load_golden_drafter(kCentroidHead, *centroid_target, DrafterQuant::Auto, DrafterHead::Clusters);
  EXPECT_FALSE(own->built_head());
  EXPECT_EQ(own->clusters(), own->checkpoint().config.num_centroids);
  EXPECT_EQ(drafter_head_note(*own), "centroid head");
}

// A built head's step scores one cluster's tokens (the best of 4), each with the score the stored
// dense head gives that token: the same rows through the same kernels, bit for bit, except for
// quantized rows in exact precision, which the candidate path widens to f32 first.
TEST(DrafterCandidateHead, CandidatesCarryTheDenseHeadsScores) {
  for (Precision precision : {Precision::Exact, Precision::Fast}) {
    for (DrafterQuant quant : {DrafterQuant::None, DrafterQuant::Q4}) {
      SCOPED_TRACE(std::string(precision_name(precision)) + " " + drafter_quant_name(quant));
      auto model = load_golden_target(kDenseHead, precision);
      const std::vector<int32_t> prompt = golden_prompt(kDenseHead);
      ThreadPool pool(2);
      TargetCache cache = model->new_cache();
      ForwardRequest req;
      req.rows = OutputRows::Last;
      req.hidden = true;
      const ForwardOutput out = model->forward(cache, prompt, req, pool);
      const DraftStep dense = load_golden_drafter(kDenseHead, *model, quant, DrafterHead::Stored)
                                  ->step(prompt.back(), out.hidden_row(0), cache, 0, pool);
      const DraftStep built = load_golden_drafter(kDenseHead, *model, quant, DrafterHead::Clusters)
                                  ->step(prompt.back(), out.hidden_row(0), cache, 0, pool);
      ASSERT_EQ(built.candidate_ids.size(), 128u);
      float largest = 0.0f;
      for (float v : dense.candidate_scores) largest = std::max(largest, std::fabs(v));
      for (size_t i = 0; i < built.candidate_ids.size(); ++i) {
        const auto id = static_cast<size_t>(built.candidate_ids[i]);
        ASSERT_LT(id, dense.candidate_scores.size());
        if (precision == Precision::Exact && quant != DrafterQuant::None)
          EXPECT_NEAR(built.candidate_scores[i], dense.candidate_scores[id], 1e-5 * largest) << "token " << id;
        else
          EXPECT_EQ(built.candidate_scores[i], dense.candidate_scores[id]) << "token " << id;
      }
      const std::vector<DraftCandidate> best = built.top(1);
      EXPECT_EQ(built.token, best[0].id);
      EXPECT_EQ(built.post_projection, dense.post_projection);
    }
  }
}

// Rows of two sequences in one batched step: each row's candidates and scores are the bytes its
// step alone gives (each row chooses its own clusters).
TEST(DrafterCandidateHead, BatchedStepsGiveEachRowItsOwnStep) {
  auto model = load_golden_target(kDenseHead, Precision::Fast);
  const auto drafter = load_golden_drafter(kDenseHead, *model, DrafterQuant::Auto, DrafterHead::Clusters);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = golden_prompt(kDenseHead);
  const std::vector<int32_t> other(prompt.rbegin(), prompt.rend());
  ForwardRequest req;
  req.rows = OutputRows::Last;
  req.hidden = true;
  TargetCache a = model->new_cache(), b = model->new_cache();
  const ForwardOutput out_a = model->forward(a, prompt, req, pool);
  const ForwardOutput out_b = model->forward(b, other, req, pool);
  const std::vector<DraftRow> rows = {{prompt.back(), out_a.hidden_row(0), &a, 0},
                                      {other.back(), out_b.hidden_row(0), &b, 0}};
  const std::vector<DraftStep> batched = drafter->step_batch(rows, pool);
  for (size_t i = 0; i < rows.size(); ++i) {
    const DraftStep alone = drafter->step(rows[i].token, rows[i].hidden, *rows[i].cache, 0, pool);
    EXPECT_EQ(batched[i].token, alone.token) << "row " << i;
    EXPECT_EQ(batched[i].candidate_ids, alone.candidate_ids) << "row " << i;
    ASSERT_EQ(batched[i].candidate_scores.size(), alone.candidate_scores.size());
    EXPECT_EQ(std::memcmp(batched[i].candidate_scores.data(), alone.candidate_scores.data(),
                          alone.candidate_scores.size() * sizeof(float)),
              0)
        << "row " << i;
  }
}

TEST(DrafterCandidateHead, SpeculativeEqualsPlainWithTheBuiltHead) {
  for (Precision precision : {Precision::Exact, Precision::Fast}) {
    SCOPED_TRACE(precision_name(precision));
    auto model = load_golden_target(kDenseHead, precision);
    const auto drafter = load_golden_drafter(kDenseHead, *model, DrafterQuant::Auto, DrafterHead::Clusters);
    ASSERT_TRUE(drafter->built_head());
    spec_test::expect_speculative_equals_plain(kDenseHead, *model, *drafter);
  }
}

TEST(DrafterCandidateHead, RunNamesTheBuiltHeadAndRefusesUnknownSettings) {
  spec_test::expect_run_flag(kDenseHead, "", "draft-head", "clusters", "candidate head of 4 clusters built at load)",
                             "centroid");
}

}  // namespace
}  // namespace specula
