// The drafter's affine copies made at load (DrafterQuant, model/drafter.h): which drafters get
// them under each setting, that the copied head scores close to the stored one, and that
// speculative output still equals plain output with copies of either head in either precision.
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

std::unique_ptr<Drafter> load_drafter(const std::string& name, const TargetModel& model, DrafterQuant quant) {
  return Drafter::load((golden_root() / name / "drafter").string(), model, DrafterConvention::Ollama, quant);
}

std::vector<int32_t> golden_prompt(const std::string& name) {
  return read_json_file((golden_root() / name / "expected.json").string()).at("prompt").get<std::vector<int32_t>>();
}

TEST(DrafterCopies, AutoCopiesDenseHeadDraftersInFastPrecisionOnly) {
  auto fast = load_target(kDenseHead, Precision::Fast);
  const auto dense_auto = load_drafter(kDenseHead, *fast, DrafterQuant::Auto);
  EXPECT_EQ(dense_auto->copy_bits(), 4);
  // pre/post projection, the head, and q, o, gate, up, down of each layer.
  const int matrices = 3 + 5 * static_cast<int>(dense_auto->checkpoint().config.layers.size());
  EXPECT_EQ(dense_auto->copied_matrices(), matrices);
  EXPECT_EQ(drafter_copies_note(*dense_auto), fmt::format("4-bit copies of {} matrices", matrices));
  EXPECT_EQ(load_drafter(kDenseHead, *fast, DrafterQuant::None)->copy_bits(), 0);
  EXPECT_EQ(drafter_copies_note(*load_drafter(kDenseHead, *fast, DrafterQuant::None)), "");
  EXPECT_EQ(load_drafter(kDenseHead, *load_target(kDenseHead, Precision::Exact), DrafterQuant::Auto)->copy_bits(), 0);

  auto centroid_target = load_target(kCentroidHead, Precision::Fast);
  EXPECT_EQ(load_drafter(kCentroidHead, *centroid_target, DrafterQuant::Auto)->copy_bits(), 0);
  EXPECT_EQ(load_drafter(kCentroidHead, *centroid_target, DrafterQuant::Q8)->copy_bits(), 8);
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
  auto model = load_target(kDenseHead, Precision::Fast);
  const std::vector<int32_t> prompt = golden_prompt(kDenseHead);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  ForwardRequest req;
  req.rows = OutputRows::Last;
  req.hidden = true;
  const ForwardOutput out = model->forward(cache, prompt, req, pool);
  const auto stored = load_drafter(kDenseHead, *model, DrafterQuant::None);
  const DraftStep want = stored->step(prompt.back(), out.hidden_row(0), cache, 0, pool);
  double largest = 0.0;
  for (float s : want.candidate_scores) largest = std::max(largest, std::fabs(static_cast<double>(s)));
  for (const auto& [quant, bound] : {std::pair{DrafterQuant::Q8, 0.02}, std::pair{DrafterQuant::Q4, 0.3}}) {
    const DraftStep got =
        load_drafter(kDenseHead, *model, quant)->step(prompt.back(), out.hidden_row(0), cache, 0, pool);
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
      auto model = load_target(name, precision);
      const std::vector<int32_t> prompt = golden_prompt(name);
      ThreadPool pool(2);
      TargetCache cache = model->new_cache();
      GenerateOptions g;
      g.max_tokens = 24;
      g.ignore_eos = true;
      const std::vector<int32_t> plain = generate_greedy(*model, cache, prompt, g, pool).tokens;
      const auto drafter = load_drafter(name, *model, DrafterQuant::Q4);
      ASSERT_GT(drafter->copied_matrices(), 0);
      SpeculativeOptions o;
      o.max_tokens = 24;
      o.ignore_eos = true;
      o.gamma.fixed = 3;
      const SpeculativeResult r = generate_speculative(*model, cache, drafter.get(), prompt, o, pool);
      EXPECT_EQ(r.tokens, plain);
      EXPECT_GT(r.stats.drafted, 0);
    }
  }
}

// `run --draft-quant`: the statistics line names the copies, the tokens are those of the stored
// weights, and a setting outside the list is a usage error naming the flag.
TEST(DrafterCopies, RunReportsTheCopiesAndRefusesUnknownSettings) {
  const fs::path dir = golden_root() / kDenseHead;
  std::string tokens;
  for (int32_t t : golden_prompt(kDenseHead)) tokens += (tokens.empty() ? "" : ",") + std::to_string(t);
  const std::string base = "run --model " + (dir / "model").string() + " --draft " + (dir / "drafter").string() +
                           " --gamma 3 --max-tokens 16 --ignore-eos --threads 1 --tokens " + tokens;
  const test::CliResult stored = test::run_cli(base + " --draft-quant none");
  const test::CliResult copied = test::run_cli(base + " --draft-quant q8", true);
  ASSERT_EQ(stored.code, 0);
  ASSERT_EQ(copied.code, 0) << copied.out;
  EXPECT_NE(copied.out.find("(drafter: 8-bit copies of "), std::string::npos) << copied.out;
  EXPECT_NE(copied.out.find(stored.out), std::string::npos) << "tokens differ:\n" << stored.out << "\n" << copied.out;
  const test::CliResult bad = test::run_cli(base + " --draft-quant q5", true);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("--draft-quant"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace specula
