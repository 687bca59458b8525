// `synth --with-towers` (docs/gemma4.md §3.4): the vision / audio tower tensors of the multimodal
// releases, written with their real names beside a tiny text model, loaded back by the text loader
// (which ignores them) and counted apart by the summary; the full-size tower inventories checked
// without writing them against the published totals; the preset facts of the released configs.
#include <gtest/gtest.h>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "specula/io/checkpoint.h"
#include "specula/io/checkpoint_summary.h"
#include "specula/io/towers.h"
#include "specula/synth/plan.h"
#include "specula/synth/presets.h"
#include "specula/synth/writer.h"
#include "specula/util/error.h"
#include "temp_dir.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using synth::Naming;
using synth::SynthOptions;

SynthOptions options(const std::string& preset, bool quantized, bool towers) {
  SynthOptions o;
  o.preset = preset;
  o.seed = 7;
  if (quantized) o.quant = QuantSpec{4, 64, "affine"};
  o.naming = quantized ? Naming::Mlx : Naming::Hf;
  o.with_towers = towers;
  return o;
}

CheckpointSummary summary_of(const synth::CheckpointPlan& plan) {
  return summarize_checkpoint(load_target(plan.config, "/synthetic/config.json",
                                          TensorStore::from_views("/synthetic", synth::plan_views(plan))));
}

TEST(SynthTowers, TinyTowersLoadBesideTheTextModelAndAreCountedApart) {
  test::ScopedTempDir scratch("specula-towers");
  for (const std::string preset : {"tiny-dense", "tiny-e4b", "tiny-kveq", "tiny-moe"}) {
    for (const bool quantized : {false, true}) {
      SCOPED_TRACE(preset + (quantized ? " q4 mlx" : " bf16 hf"));
      const synth::CheckpointPlan plan = synth::plan_target(options(preset, quantized, true));
      const std::string dir = scratch.file(fmt::format("{}-{}", preset, quantized));
      synth::write_checkpoint(plan, dir);
      const TargetCheckpoint ck = load_target(dir);
      const CheckpointSummary s = summarize_checkpoint(ck);
      const CheckpointSummary plain = summary_of(synth::plan_target(options(preset, quantized, false)));
      EXPECT_EQ(s.text_parameters, plain.parameters);
      EXPECT_EQ(s.parameters, plain.parameters + s.tower_parameters);
      EXPECT_GT(s.tower_parameters, 0u);
      EXPECT_EQ(s.bytes_per_token, plain.bytes_per_token);  // towers are never streamed
      EXPECT_EQ(s.tensor_bytes, plain.tensor_bytes + s.tower_bytes);
      ASSERT_EQ(s.storage.size(), plain.storage.size());
      for (size_t i = 0; i < s.storage.size(); ++i) EXPECT_EQ(s.storage[i].kind, plain.storage[i].kind);
      const bool audio = synth::find_preset(preset).audio.has_value();
      EXPECT_EQ(s.towers.size(), audio ? 2u : 1u);
      const std::string root = quantized ? "" : "model.";
      EXPECT_TRUE(ck.store.contains(root + "vision_tower.patch_embedder.position_embedding_table"));
      EXPECT_TRUE(ck.store.contains(root + "embed_vision.embedding_projection.weight"));
      EXPECT_EQ(ck.store.contains(root + "audio_tower.output_proj.bias"), audio);
      const json c = read_json_file(dir + "/config.json");
      EXPECT_EQ(c["vision_config"]["model_type"], "gemma4_vision");
      EXPECT_EQ(c["audio_config"].is_null(), !audio);
      EXPECT_TRUE(fs::exists(dir + "/processor_config.json"));
      const std::string text = format_summary(s);
      EXPECT_NE(text.find("towers        "), std::string::npos) << text;
      EXPECT_EQ(summary_json(s)["tower_parameters"].get<uint64_t>(), s.tower_parameters);
    }
  }
  // A text-only rewrite of the directory leaves no processor config behind.
  const std::string dir = scratch.file("tiny-dense-0");
  synth::write_checkpoint(synth::plan_target(options("tiny-dense", false, false)), dir);
  EXPECT_FALSE(fs::exists(dir + "/processor_config.json"));
}

TEST(SynthTowers, FullSizeTowerInventories) {
  const auto inventory = [](const std::string& preset) {
    const auto plan = synth::plan_target(options(preset, false, true));
    size_t towers = 0;
    for (const TensorSpec& t : plan.tensors) towers += !tower_of(t.name).empty();
    const CheckpointSummary s = summary_of(plan);
    std::cout << fmt::format("  {:8} towers: {} tensors, {} params; text {} params; total {}\n", preset, towers,
                             s.tower_parameters, s.text_parameters, s.parameters);
    return std::pair{towers, s};
  };
  // The 31B's vision tower: 27 layers of 13 tensors, the patch embedder (2), std_bias / std_scale
  // and the projection into the text width, as the released checkpoint lists them.
  const auto [t31, s31] = inventory("31b");
  EXPECT_EQ(t31, 27u * 13 + 5);
  EXPECT_EQ(s31.towers.size(), 1u);
  const auto [t26, s26] = inventory("26b-a4b");
  EXPECT_EQ(t26, 27u * 13 + 5);
  EXPECT_EQ(s31.tower_parameters - 5376u * 1152, s26.tower_parameters - 2816u * 1152);  // one encoder
  // E2B / E4B: the smaller vision encoder and the conformer audio encoder; with them the totals
  // are the published "with embeddings" sizes (5.1B, 8B).
  const auto [te2, e2] = inventory("e2b");
  const auto [te4, e4] = inventory("e4b");
  EXPECT_EQ(e2.towers.size(), 2u);
  EXPECT_EQ(te2, te4);
  EXPECT_GT(e2.parameters, 5.0e9);
  EXPECT_LT(e2.parameters, 5.2e9);
  EXPECT_GT(e4.parameters, 7.9e9);
  EXPECT_LT(e4.parameters, 8.1e9);
  try {
    synth::plan_target(options("12b", false, true));
    ADD_FAILURE() << "12b has no towers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("preset '12b' has no vision or audio towers"), std::string::npos) << e.what();
  }
}

TEST(SynthPresets, FactsOfTheReleasedConfigs) {
  const auto target = [](const std::string& p) { return synth::plan_target(options(p, false, false)).config; };
  const auto drafter = [](const std::string& p) { return synth::plan_drafter(options(p, false, false)).config; };
  EXPECT_EQ(target("12b")["text_config"]["max_position_embeddings"], 262144);
  EXPECT_EQ(drafter("31b")["text_config"]["num_attention_heads"], 32);
  EXPECT_EQ(drafter("26b-a4b")["text_config"]["attention_k_eq_v"], true);
  EXPECT_EQ(drafter("31b")["text_config"]["attention_k_eq_v"], true);
  EXPECT_EQ(drafter("e2b")["text_config"]["num_key_value_heads"], 1);
}

}  // namespace
}  // namespace specula
