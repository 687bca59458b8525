// Assistant drafters loaded from GGUF (`gemma4-assistant`): a golden drafter converted to GGUF
// drafts what the safetensors drafter with the dense head drafts (a centroid drafter's GGUF runs
// the dense head, as llama.cpp's converter leaves the centroids out); speculative greedy output
// with it equals the golden greedy tokens across target formats; a drafter that does not fit its
// target is refused naming the file.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "spec_golden_util.h"
#include "specula/io/checkpoint.h"
#include "specula/io/config.h"
#include "specula/io/weight_files.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"
#include "specula/synth/gguf_export.h"
#include "temp_dir.h"

namespace specula {
namespace {

using spec_test::golden_root;
using test::error_of;

std::string golden(const std::string& name, const char* part) { return (golden_root() / name / part).string(); }

// The golden's safetensors drafter with the dense tied head, whatever its config chooses.
std::unique_ptr<Drafter> dense_safetensors_drafter(const std::string& name, const TargetModel& target) {
  const std::string dir = golden(name, "drafter");
  nlohmann::json config = read_json_file(dir + "/config.json");
  config["use_ordered_embeddings"] = false;
  auto ck = std::make_unique<DrafterCheckpoint>(load_drafter(config, dir + "/config.json", open_weights(dir)));
  return std::make_unique<Drafter>(std::move(ck), target, DrafterConvention::Ollama);
}

std::string drafter_gguf(const std::string& name, const test::ScopedTempDir& tmp) {
  const std::string file = tmp.file(name + "-assistant.gguf");
  synth::write_drafter_gguf(load_drafter(golden(name, "drafter")), file, {});
  return file;
}

// max |a - b| / max |b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// Three chained draft steps after the prompt: the same tokens, positions, post_projection and
// dense scores (the GGUF holds the bf16 weights as f32, the same values).
void expect_same_drafts(const TargetModel& model, const Drafter& gguf, const Drafter& reference,
                        const std::vector<int32_t>& prompt) {
  ASSERT_FALSE(gguf.centroid_head());
  ASSERT_FALSE(reference.centroid_head());
  ThreadPool pool(1);
  TargetCache cache = model.new_cache();
  ForwardRequest req;
  req.rows = OutputRows::Last;
  req.hidden = true;
  const ForwardOutput out = model.forward(cache, prompt, req, pool);
  std::vector<float> g(out.hidden_row(0), out.hidden_row(0) + out.hidden_size);
  int32_t token = prompt.back();
  for (int64_t k = 0; k < 3; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const DraftStep got = gguf.step(token, g.data(), cache, k, pool);
    const DraftStep want = reference.step(token, g.data(), cache, k, pool);
    EXPECT_EQ(got.token, want.token);
    EXPECT_EQ(got.position, want.position);
    ASSERT_EQ(got.candidate_ids, want.candidate_ids);
    EXPECT_LT(relative_error(got.candidate_scores, want.candidate_scores), 1e-5);
    EXPECT_LT(relative_error(got.post_projection, want.post_projection), 1e-5);
    token = want.token;
    g = want.post_projection;
  }
}

TEST(GgufDrafter, DenseDrafterDraftsWhatTheSafetensorsDrafterDrafts) {
  const std::string name = "dense-densehead-bf16";
  const test::ScopedTempDir tmp("specula-gguf-drafter");
  const nlohmann::json expected = read_json_file((golden_root() / name / "expected.json").string());
  auto model = TargetModel::load(golden(name, "model"));
  auto gguf = Drafter::load(drafter_gguf(name, tmp), *model);
  auto reference = Drafter::load(golden(name, "drafter"), *model);
  expect_same_drafts(*model, *gguf, *reference, expected.at("prompt").get<std::vector<int32_t>>());
}

// A centroid drafter's GGUF beside a GGUF target (both files converted): the dense head.
TEST(GgufDrafter, CentroidDrafterRunsTheDenseHeadBesideAGgufTarget) {
  const std::string name = "dense-bf16-hf";
  const test::ScopedTempDir tmp("specula-gguf-drafter");
  const nlohmann::json expected = read_json_file((golden_root() / name / "expected.json").string());
  const std::string target = tmp.file("model.gguf");
  synth::write_target_gguf(load_target(golden(name, "model")), target, {});
  auto model = TargetModel::load(target);
  auto gguf = Drafter::load(drafter_gguf(name, tmp), *model);
  auto reference = dense_safetensors_drafter(name, *model);
  expect_same_drafts(*model, *gguf, *reference, expected.at("prompt").get<std::vector<int32_t>>());
}

// Speculative greedy decoding with the GGUF drafter gives the golden greedy tokens beside a
// safetensors target and a GGUF one, accepting as many drafts as the safetensors drafter with the
// dense head does (the same drafts).
TEST(GgufDrafter, SpeculativeGreedyEqualsPlainDecodingAcrossTargetFormats) {
  const std::string name = "dense-densehead-bf16";
  const test::ScopedTempDir tmp("specula-gguf-drafter");
  const nlohmann::json expected = read_json_file((golden_root() / name / "expected.json").string());
  const auto prompt = expected.at("prompt").get<std::vector<int32_t>>();
  const auto greedy = expected.at("greedy").get<std::vector<int32_t>>();
  const std::string drafter_file = drafter_gguf(name, tmp);
  const std::string target_file = tmp.file("model.gguf");
  synth::write_target_gguf(load_target(golden(name, "model")), target_file, {});
  SpeculativeOptions s;
  s.max_tokens = static_cast<int64_t>(greedy.size());
  s.ignore_eos = true;
  s.gamma.fixed = 3;
  ThreadPool pool(1);
  for (const std::string& target : {golden(name, "model"), target_file}) {
    SCOPED_TRACE(target);
    auto model = TargetModel::load(target);
    auto gguf = Drafter::load(drafter_file, *model);
    auto reference = Drafter::load(golden(name, "drafter"), *model);
    TargetCache cache = model->new_cache();
    const SpeculativeResult got = generate_speculative(*model, cache, gguf.get(), prompt, s, pool);
    const SpeculativeResult want = generate_speculative(*model, cache, reference.get(), prompt, s, pool);
    EXPECT_EQ(got.tokens, greedy);
    EXPECT_EQ(got.stats.accepted, want.stats.accepted);
    EXPECT_GT(got.stats.drafted, 0);
  }
}

TEST(GgufDrafter, ADrafterForAnotherTargetIsRefusedNamingTheFile) {
  const test::ScopedTempDir tmp("specula-gguf-drafter");
  // Backbone width 192 against a 128-wide target.
  const std::string wide = drafter_gguf("e4b-like-q2g32-window6", tmp);
  auto model = TargetModel::load(golden("dense-densehead-bf16", "model"));
  const std::string e = error_of([&] { Drafter::load(wide, *model); });
  EXPECT_NE(e.find("drafter " + wide + " does not fit target"), std::string::npos) << e;
  EXPECT_NE(e.find("drafter backbone_hidden_size = 192 (" + wide + ") but target hidden_size = 128"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace specula
