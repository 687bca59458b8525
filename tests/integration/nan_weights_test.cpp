// Non-finite weights end to end: a synthetic checkpoint with a NaN in one dense weight,
// and one with infinite scales in a quantized weight. `specula run` (greedy, sampled and
// speculative) must stop with an error naming the position and pointing at `inspect --check`
// instead of emitting tokens chosen from NaN logits, and `specula inspect --check` must name the
// corrupt tensor. The clean checkpoint runs and checks clean, so the tests can tell the cases apart.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/wait.h>
#include "cli_runner.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "specula/model/generate.h"
#include "specula/model/target_model.h"
#include "specula/synth/plan.h"
#include "specula/synth/writer.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

using Result = specula::test::CliResult;
using specula::test::run_cli;

// Overwrites element `index` (BF16) of tensor `name` in the plan with `value` after its fill.
void poison(synth::CheckpointPlan& plan, const std::string& name, int64_t index, float value) {
  for (TensorSpec& t : plan.tensors) {
    if (t.name != name) continue;
    ASSERT_EQ(t.dtype, DType::BF16) << name;
    int64_t row_elems = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) row_elems *= t.shape[d];
    t.fill = [inner = t.fill, index, value, row_elems](int64_t b, int64_t e, std::span<std::byte> out) {
      inner(b, e, out);
      const int64_t local = index - b * row_elems;
      if (local < 0 || local >= (e - b) * row_elems) return;
      const uint16_t v = f32_to_bf16(value);
      std::memcpy(out.data() + local * 2, &v, 2);
    };
    return;
  }
  FAIL() << "no tensor " << name << " in the plan";
}

class NanWeights : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "specula-nan-weights-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    synth::SynthOptions dense;
    dense.preset = "tiny-dense";
    synth::write_checkpoint(synth::plan_target(dense), clean());
    synth::write_checkpoint(synth::plan_drafter(dense), drafter());

    synth::CheckpointPlan nan_plan = synth::plan_target(dense);
    poison(nan_plan, "model.language_model.layers.2.mlp.down_proj.weight", 5, std::numeric_limits<float>::quiet_NaN());
    synth::write_checkpoint(nan_plan, nan_dense());

    synth::SynthOptions quant = dense;
    quant.quant = QuantSpec{4, 32, "affine"};
    synth::CheckpointPlan inf_plan = synth::plan_target(quant);
    poison(inf_plan, "language_model.model.layers.0.self_attn.q_proj.scales", 0,
           std::numeric_limits<float>::infinity());
    synth::write_checkpoint(inf_plan, inf_scales());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string clean() { return dir_ + "/clean"; }
  static std::string drafter() { return dir_ + "/drafter"; }
  static std::string nan_dense() { return dir_ + "/nan-dense"; }
  static std::string inf_scales() { return dir_ + "/inf-scales"; }

  static std::string dir_;
};

std::string NanWeights::dir_;

const char* kRun = " --tokens 2,10,11,12 --max-tokens 4 --ignore-eos --threads 1";

TEST_F(NanWeights, CleanCheckpointRunsAndChecksClean) {
  const Result run = run_cli("run --model " + clean() + kRun, true);
  EXPECT_EQ(run.code, 0) << run.out;
  const Result check = run_cli("inspect --check " + clean(), true);
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_NE(check.out.find("all finite"), std::string::npos) << check.out;
}

TEST_F(NanWeights, GreedyRunStopsWithAClearError) {
  const Result r = run_cli("run --model " + nan_dense() + kRun, true);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("non-finite logits at position 3"), std::string::npos) << r.out;  // the prefill's last row
  EXPECT_NE(r.out.find("specula inspect --check " + nan_dense()), std::string::npos) << r.out;
}

TEST_F(NanWeights, SampledAndSpeculativeRunsStopWithAClearError) {
  for (const std::string& extra :
       std::vector<std::string>{" --temperature 0.8 --seed 3", " --draft " + drafter(), " --draft lookup"}) {
    const Result r = run_cli("run --model " + nan_dense() + kRun + extra, true);
    EXPECT_EQ(r.code, 1) << extra << "\n" << r.out;
    EXPECT_NE(r.out.find("non-finite logits"), std::string::npos) << extra << "\n" << r.out;
  }
}

TEST_F(NanWeights, InspectCheckNamesTheNanTensor) {
  const Result r = run_cli("inspect --check " + nan_dense(), true);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("model.language_model.layers.2.mlp.down_proj.weight: 1 NaN, 0 inf, first at element 5"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 tensor(s) hold NaN or infinite values"), std::string::npos) << r.out;
}

TEST_F(NanWeights, InfiniteQuantScalesStopTheRunAndAreNamed) {
  const Result run = run_cli("run --model " + inf_scales() + kRun, true);
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("non-finite logits"), std::string::npos) << run.out;
  const Result check = run_cli("inspect --check --json " + inf_scales(), true);
  EXPECT_EQ(check.code, 1) << check.out;
  EXPECT_NE(check.out.find("\"tensor\": \"language_model.model.layers.0.self_attn.q_proj.scales\""), std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("\"inf\": 1"), std::string::npos) << check.out;
}

// The library path the engine and server use: the error comes from the forward pass, before any
// token is chosen, so no caller can emit one.
TEST_F(NanWeights, GenerateThrowsBeforeEmittingAToken) {
  auto model = TargetModel::load(nan_dense());
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  GenerateOptions g;
  g.max_tokens = 4;
  int emitted = 0;
  const std::vector<int32_t> prompt = {2, 10, 11, 12};
  EXPECT_THROW(generate_greedy(*model, cache, prompt, g, pool,
                               [&](int32_t) {
                                 ++emitted;
                                 return true;
                               }),
               Error);
  EXPECT_EQ(emitted, 0);
}

}  // namespace
}  // namespace specula
