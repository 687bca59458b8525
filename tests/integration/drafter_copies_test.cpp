// The drafter's affine copies made at load (DrafterQuant, model/drafter.h): which drafters get
// them under each setting, that the copied head scores close to the stored one, and that
// speculative output still equals plain output with copies of either head in either precision.
#include <algorithm>
#include <cmath>
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

TEST(DrafterCopies, AutoCopiesDenseHeadDraftersInFastPrecisionOnly) {
  auto fast = load_golden_target(kDenseHead, Precision::Fast);
  const auto dense_auto = load_golden_drafter(kDenseHead, *fast, DrafterQuant::Auto);
  EXPECT_EQ(dense_auto->copy_bits(), 4);
  // pre/post projection, the head, and q, o, gate, up, down of each layer.
  const int matrices = 3 + 5 * static_cast<int>(dense_auto->checkpoint().config.layers.size());
  EXPECT_EQ(dense_auto->copied_matrices(), matrices);
  EXPECT_EQ(drafter_copies_note(*dense_auto), fmt::format("4-bit copies of {} matrices", matrices));
  EXPECT_EQ(load_golden_drafter(kDenseHead, *fast, DrafterQuant::None)->copy_bits(), 0);
  EXPECT_EQ(drafter_copies_note(*load_golden_drafter(kDenseHead, *fast, DrafterQuant::None)), "");
  EXPECT_EQ(load_golden_drafter(kDenseHead, *load_golden_target(kDenseHead, Precision::Exact), DrafterQuant::Auto)
                ->copy_bits(),
            0);

  auto centroid_target = load_golden_target(kCentroidHead, Precision::Fast);
  EXPECT_EQ(load_golden_drafter(kCentroidHead, *centroid_target, DrafterQuant::Auto)->copy_bits(), 0);
  EXPECT_EQ(load_golden_drafter(kCentroidHead, *centroid_target, DrafterQuant::Q8)->copy_bits(), 8);
}

TEST(DrafterCopies, SettingsParseAndUnknownOnesAreNamed) {
  for (DrafterQuant q : {DrafterQuant::Auto, DrafterQuant::None, DrafterQuant::Q4, DrafterQuant::Q8})
    EXPECT_EQ(parse_drafter_quant(drafter_quant_name(q)), q);
  try {
    parse_drafter_quant("q5");
    FAIL() << "q5 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q5'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("auto, none, q4 or q8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(drafter_quant_bits(DrafterQuant::Auto, false, Precision::Int8), 4);
  EXPECT_EQ(drafter_quant_bits(DrafterQuant::Auto, true, Precision::Fast), 0);
  EXPECT_EQ(drafter_quant_bits(DrafterQuant::Q4, true, Precision::Exact), 4);
}

// The copied head's scores of the first draft step, against the stored head's: the copy is read,
// and read right (a misread layout would give unrelated scores).
TEST(DrafterCopies, CopiedHeadScoresStayCloseToTheStoredHead) {
  // Fast precision, where the copies run the packed kernels.
  auto model = load_golden_target(kDenseHead, Precision::Fast);
  const std::vector<int32_t> prompt = golden_prompt(kDenseHead);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  ForwardRequest req;
  req.rows = OutputRows::Last;
  req.hidden = true;
  const ForwardOutput out = model->forward(cache, prompt, req, pool);
  const auto stored = load_golden_drafter(kDenseHead, *model, DrafterQuant::None);
  const DraftStep want = stored->step(prompt.back(), out.hidden_row(0), cache, 0, pool);
  double largest = 0.0;
  for (float s : want.candidate_scores) largest = std::max(largest, std::fabs(static_cast<double>(s)));
  for (const auto& [quant, bound] : {std::pair{DrafterQuant::Q8, 0.02}, std::pair{DrafterQuant::Q4, 0.3}}) {
    const DraftStep got =
        load_golden_drafter(kDenseHead, *model, quant)->step(prompt.back(), out.hidden_row(0), cache, 0, pool);
    ASSERT_EQ(got.candidate_ids, want.candidate_ids);
    double diff = 0.0;
    for (size_t i = 0; i < got.candidate_scores.size(); ++i)
      diff = std::max(diff, std::fabs(static_cast<double>(got.candidate_scores[i] - want.candidate_scores[i])));
    EXPECT_LT(diff / largest, bound) << drafter_quant_name(quant);
    EXPECT_GT(diff, 0.0) << drafter_quant_name(quant) << ": the copy gave the stored head's exact scores";
  }
}

TEST(DrafterCopies, SpeculativeEqualsPlainWithCopiesOfEitherHead) {
  for (const std::string name : {kDenseHead, kCentroidHead}) {
    for (Precision precision : {Precision::Exact, Precision::Fast}) {
      SCOPED_TRACE(name + " " + precision_name(precision));
      auto model = load_golden_target(name, precision);
      const auto drafter = load_golden_drafter(name, *model, DrafterQuant::Q4);
      ASSERT_GT(drafter->copied_matrices(), 0);
      spec_test::expect_speculative_equals_plain(name, *model, *drafter);
    }
  }
}

// `run --draft-quant`: the statistics line names the copies, the tokens are those of the stored
// weights, and a setting outside the list is a usage error naming the flag.
TEST(DrafterCopies, RunReportsTheCopiesAndRefusesUnknownSettings) {
  spec_test::expect_run_flag(kDenseHead, " --draft-quant none", "draft-quant", "q8", "(drafter: 8-bit copies of ",
                             "q5");
}

}  // namespace
}  // namespace specula
