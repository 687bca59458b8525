// The candidate head built at load for a dense-head drafter (DrafterHead::Clusters,
// model/drafter.h): a step scores the built clusters' best tokens with the stored head's own
// scores, speculative output still equals plain output, a centroid-head drafter keeps its own
// head, and `run --draft-head` names the head and refuses unknown settings.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "spec_golden_util.h"
#include "specula/io/config.h"
#include "specula/model/drafter.h"
#include "specula/model/generate.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"
#include "specula/util/error.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using spec_test::golden_root;

const char* const kDenseHead = "dense-densehead-bf16";
const char* const kCentroidHead = "e4b-like-bf16-hf";

std::unique_ptr<TargetModel> load_target(const std::string& name, Precision precision) {
  TargetOptions o;
  o.precision = precision;
  return TargetModel::load((golden_root() / name / "model").string(), o);
}

std::unique_ptr<Drafter> load_drafter(const std::string& name, const TargetModel& model, DrafterQuant quant,
                                      DrafterHead head) {
  return Drafter::load((golden_root() / name / "drafter").string(), model, DrafterConvention::Ollama, quant, head);
}

std::vector<int32_t> golden_prompt(const std::string& name) {
  return read_json_file((golden_root() / name / "expected.json").string()).at("prompt").get<std::vector<int32_t>>();
}

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
  auto dense_target = load_target(kDenseHead, Precision::Fast);
  const auto stored = load_drafter(kDenseHead, *dense_target, DrafterQuant::Auto, DrafterHead::Stored);
  EXPECT_FALSE(stored->candidate_head());
  EXPECT_EQ(drafter_head_note(*stored), "dense head");
  const auto built = load_drafter(kDenseHead, *dense_target, DrafterQuant::Auto, DrafterHead::Clusters);
  EXPECT_TRUE(built->candidate_head());
  EXPECT_TRUE(built->built_head());
  EXPECT_EQ(built->clusters(), 4);  // 512 tokens in clusters of 128
  EXPECT_EQ(drafter_head_note(*built), "candidate head of 4 clusters built at load");

  auto centroid_target = load_target(kCentroidHead, Precision::Fast);
  const auto own = load_drafter(kCentroidHead, *centroid_target, DrafterQuant::Auto, DrafterHead::Clusters);
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
      auto model = load_target(kDenseHead, precision);
      const std::vector<int32_t> prompt = golden_prompt(kDenseHead);
      ThreadPool pool(2);
      TargetCache cache = model->new_cache();
      ForwardRequest req;
      req.rows = OutputRows::Last;
      req.hidden = true;
      const ForwardOutput out = model->forward(cache, prompt, req, pool);
      const DraftStep dense = load_drafter(kDenseHead, *model, quant, DrafterHead::Stored)
                                  ->step(prompt.back(), out.hidden_row(0), cache, 0, pool);
      const DraftStep built = load_drafter(kDenseHead, *model, quant, DrafterHead::Clusters)
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

TEST(DrafterCandidateHead, SpeculativeEqualsPlainWithTheBuiltHead) {
  for (Precision precision : {Precision::Exact, Precision::Fast}) {
    SCOPED_TRACE(precision_name(precision));
    auto model = load_target(kDenseHead, precision);
    const std::vector<int32_t> prompt = golden_prompt(kDenseHead);
    ThreadPool pool(2);
    TargetCache cache = model->new_cache();
    GenerateOptions g;
    g.max_tokens = 24;
    g.ignore_eos = true;
    const std::vector<int32_t> plain = generate_greedy(*model, cache, prompt, g, pool).tokens;
    const auto drafter = load_drafter(kDenseHead, *model, DrafterQuant::Auto, DrafterHead::Clusters);
    SpeculativeOptions o;
    o.max_tokens = 24;
    o.ignore_eos = true;
    o.gamma.fixed = 3;
    const SpeculativeResult r = generate_speculative(*model, cache, drafter.get(), prompt, o, pool);
    EXPECT_EQ(r.tokens, plain);
    EXPECT_GT(r.stats.drafted, 0);
  }
}

TEST(DrafterCandidateHead, RunNamesTheBuiltHeadAndRefusesUnknownSettings) {
  const fs::path dir = golden_root() / kDenseHead;
  std::string tokens;
  for (int32_t t : golden_prompt(kDenseHead)) tokens += (tokens.empty() ? "" : ",") + std::to_string(t);
  const std::string base = "run --model " + (dir / "model").string() + " --draft " + (dir / "drafter").string() +
                           " --gamma 3 --max-tokens 16 --ignore-eos --threads 1 --tokens " + tokens;
  const test::CliResult stored = test::run_cli(base);
  const test::CliResult built = test::run_cli(base + " --draft-head clusters", true);
  ASSERT_EQ(stored.code, 0);
  ASSERT_EQ(built.code, 0) << built.out;
  EXPECT_NE(built.out.find("candidate head of 4 clusters built at load)"), std::string::npos) << built.out;
  EXPECT_NE(built.out.find(stored.out), std::string::npos) << "tokens differ:\n" << stored.out << "\n" << built.out;
  const test::CliResult bad = test::run_cli(base + " --draft-head centroid", true);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("--draft-head"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace specula
