// The assistant drafter against the float64 goldens (tests/data/goldens/*/expected.json,
// `first_round_drafts_gamma4`): for every case and both conventions, the four drafts of the first
// round after the prompt — token ids, query positions and the top-5 candidate ids exact; the first
// 8 post_projection values and the top-5 candidate scores within 1e-4 relative at step 0 and 1e-2
// at later steps (f32 error compounds along the chain).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "spec_golden_util.h"
#include "specula/kernels/softmax.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"

namespace specula {
namespace {

using spec_test::golden_case_names;
using spec_test::golden_root;

struct DrafterCase {
  std::string name;
  DrafterConvention convention;
};

std::vector<DrafterCase> drafter_cases() {
  std::vector<DrafterCase> out;
  for (const auto& c : golden_case_names())
    for (DrafterConvention conv : {DrafterConvention::Ollama, DrafterConvention::MlxBun}) out.push_back({c, conv});
  return out;
}

// max |got - want| / max |want| over a vector.
double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

class DrafterGolden : public ::testing::TestWithParam<DrafterCase> {};

TEST_P(DrafterGolden, FirstRoundDraftsGamma4) {
  const auto dir = golden_root() / GetParam().name;
  const DrafterConvention conv = GetParam().convention;
  const nlohmann::json expected = read_json_file((dir / "expected.json").string());
  const nlohmann::json& want = expected.at("first_round_drafts_gamma4").at(drafter_convention_name(conv));
  const std::vector<int32_t> prompt = expected.at("prompt").get<std::vector<int32_t>>();

  auto model = TargetModel::load((dir / "model").string());
  auto drafter = Drafter::load((dir / "drafter").string(), *model, conv);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  ForwardRequest req;
  req.rows = OutputRows::Last;
  req.hidden = true;
  const ForwardOutput out = model->forward(cache, prompt, req, pool);
  const int32_t pending = static_cast<int32_t>(argmax(out.logits_row(0), out.vocab_size));
  ASSERT_EQ(pending, expected.at("greedy").at(0).get<int32_t>());

  const auto& steps = want.at("steps");
  const auto want_tokens = want.at("tokens").get<std::vector<int32_t>>();
  ASSERT_EQ(steps.size(), 4u);
  std::vector<float> g(out.hidden_row(0), out.hidden_row(0) + out.hidden_size);
  int32_t t = pending;
  std::vector<int32_t> got_tokens;
  for (size_t k = 0; k < steps.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const auto& ws = steps[k];
    const DraftStep step = drafter->step(t, g.data(), cache, static_cast<int64_t>(k), pool);
    EXPECT_EQ(step.position, ws.at("position").get<int64_t>());
    EXPECT_EQ(step.token, ws.at("token").get<int32_t>());
    const double tol = k == 0 ? 1e-4 : 1e-2;

    const auto want_post = ws.at("post_projection_head").get<std::vector<double>>();
    ASSERT_GE(step.post_projection.size(), want_post.size());
    std::vector<double> got_post(step.post_projection.begin(),
                                 step.post_projection.begin() + static_cast<std::ptrdiff_t>(want_post.size()));
    EXPECT_LT(relative_error(got_post, want_post), tol);

    if (ws.contains("top5_candidates")) {
      ASSERT_TRUE(drafter->centroid_head());
      const auto want_top = ws.at("top5_candidates");
      const std::vector<DraftCandidate> top = step.top(want_top.size());
      ASSERT_EQ(top.size(), want_top.size());
      std::vector<double> got_scores, want_scores;
      for (size_t i = 0; i < top.size(); ++i) {
        EXPECT_EQ(top[i].id, want_top[i].at(0).get<int32_t>()) << "candidate rank " << i;
        got_scores.push_back(top[i].score);
        want_scores.push_back(want_top[i].at(1).get<double>());
      }
      EXPECT_LT(relative_error(got_scores, want_scores), tol);
    } else {
      EXPECT_FALSE(drafter->centroid_head());
      // The dense head scores the whole vocabulary.
      EXPECT_EQ(static_cast<int64_t>(step.candidate_ids.size()), model->vocab_size());
    }
    got_tokens.push_back(step.token);
    g = step.post_projection;
    t = step.token;
  }
  EXPECT_EQ(got_tokens, want_tokens);
  // The drafter never writes the target's caches.
  EXPECT_EQ(cache.offset(), static_cast<int64_t>(prompt.size()));
}

INSTANTIATE_TEST_SUITE_P(AllCases, DrafterGolden, ::testing::ValuesIn(drafter_cases()),
                         [](const ::testing::TestParamInfo<DrafterCase>& info) {
                           return spec_test::param_name(info.param.name + "_" +
                                                        drafter_convention_name(info.param.convention));
                         });

}  // namespace
}  // namespace specula
