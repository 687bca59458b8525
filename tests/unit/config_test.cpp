// Config parsing (docs/gemma4.md §2, §7): nested and flat target configs, quantization blocks with
// overrides, derived geometry for the real Gemma 4 family shapes (docs/gemma4.md §1), drafter and
// generation configs, and the error messages for missing, mistyped and inconsistent keys.
#include "specula/io/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_of.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using nlohmann::json;
using test::expect_error;
namespace fs = std::filesystem;

// Layer types from a period: `full_every` = 5 gives [S,S,S,S,F] repeated.
json pattern(int layers, int full_every) {
  json out = json::array();
  for (int i = 0; i < layers; ++i) out.push_back((i + 1) % full_every == 0 ? "full_attention" : "sliding_attention");
  return out;
}

struct Family {
  int64_t hidden, inter;
  int layers, full_every, heads, kv_heads;
  std::optional<int> global_kv;
  bool k_eq_v, double_wide;
  int window, ple, shared;
  bool moe;
};

// A text_config with every key the real checkpoints set (docs/gemma4.md §1, §2.2).
json text_config(const Family& f) {
  json t = {{"model_type", "gemma4_text"},
            {"hidden_size", f.hidden},
            {"num_hidden_layers", f.layers},
            {"layer_types", pattern(f.layers, f.full_every)},
            {"num_attention_heads", f.heads},
            {"num_key_value_heads", f.kv_heads},
            {"num_global_key_value_heads", f.global_kv ? json(*f.global_kv) : json(nullptr)},
            {"attention_k_eq_v", f.k_eq_v},
            {"head_dim", 256},
            {"global_head_dim", 512},
            {"intermediate_size", f.inter},
            {"use_double_wide_mlp", f.double_wide},
            {"hidden_activation", "gelu_pytorch_tanh"},
            {"rms_norm_eps", 1e-6},
            {"vocab_size", 262144},
            {"sliding_window", f.window},
            {"final_logit_softcapping", 30.0},
            {"hidden_size_per_layer_input", f.ple},
            {"vocab_size_per_layer_input", f.ple > 0 ? 262144 : 0},
            {"num_kv_shared_layers", f.shared},
            {"enable_moe_block", f.moe},
            {"tie_word_embeddings", true},
            {"rope_parameters",
             {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
              {"full_attention",
               {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}}}}};
  if (f.moe) {
    t["num_experts"] = 128;
    t["top_k_experts"] = 8;
    t["moe_intermediate_size"] = 704;
  }
  return t;
}

json wrap(const json& text) {
  return {{"model_type", "gemma4"}, {"architectures", {"Gemma4ForConditionalGeneration"}},
          {"text_config", text},    {"eos_token_id", {1, 106}},
          {"bos_token_id", 2},      {"tie_word_embeddings", true}};
}

const Family kE2B{1536, 6144, 35, 5, 8, 1, std::nullopt, false, true, 512, 256, 20, false};
const Family kE4B{2560, 10240, 42, 6, 8, 2, std::nullopt, false, false, 512, 256, 18, false};
const Family k12B{3840, 15360, 48, 6, 16, 8, 1, true, false, 1024, 0, 0, false};
const Family k26B{2816, 2112, 30, 6, 16, 8, 2, true, false, 1024, 0, 0, true};
const Family k31B{5376, 21504, 60, 6, 32, 16, 4, true, false, 1024, 0, 0, false};

TargetConfig parse(const Family& f) { return parse_target_config(wrap(text_config(f)), "e.json"); }

int count_donors(const TargetConfig& c) {
  int n = 0;
  for (const auto& g : c.layers) n += g.kv_donor;
  return n;
}

TEST(ConfigGeometry, E2B) {
  const TargetConfig c = parse(kE2B);
  ASSERT_EQ(c.layers.size(), 35u);
  EXPECT_EQ(c.first_shared_layer, 15);
  EXPECT_EQ(count_donors(c), 15);
  EXPECT_EQ(c.last_sliding_donor, 13);
  EXPECT_EQ(c.last_full_donor, 14);
  for (const auto& g : c.layers) {
    const bool full = g.index % 5 == 4;
    EXPECT_EQ(g.type, full ? LayerType::Full : LayerType::Sliding) << g.index;
    EXPECT_EQ(g.head_dim, full ? 512 : 256);
    EXPECT_EQ(g.num_kv_heads, 1);
    EXPECT_FALSE(g.k_eq_v);
    if (g.index < 15) {
      EXPECT_EQ(g.kv_source, g.index);
      EXPECT_EQ(g.mlp_width, 6144);
    } else {
      EXPECT_EQ(g.kv_source, full ? 14 : 13) << g.index;
      EXPECT_EQ(g.mlp_width, 12288) << g.index;  // double-wide on KV-shared layers
    }
    EXPECT_EQ(g.rope.type, full ? "proportional" : "default");
  }
  EXPECT_EQ(c.text.hidden_size_per_layer_input, 256);
  EXPECT_TRUE(c.text.keys_to_infer.empty());
}

TEST(ConfigGeometry, E4B) {
  const TargetConfig c = parse(kE4B);
  EXPECT_EQ(c.first_shared_layer, 24);
  EXPECT_EQ(count_donors(c), 24);
  EXPECT_EQ(c.last_sliding_donor, 22);
  EXPECT_EQ(c.last_full_donor, 23);
  for (const auto& g : c.layers) {
    const bool full = g.index % 6 == 5;
    EXPECT_EQ(g.num_kv_heads, 2);
    EXPECT_EQ(g.mlp_width, 10240);  // use_double_wide_mlp false
    if (g.index >= 24) {
      EXPECT_EQ(g.kv_source, full ? 23 : 22) << g.index;
    }
  }
}

TEST(ConfigGeometry, Unified12B) {
  const TargetConfig c = parse(k12B);
  EXPECT_EQ(count_donors(c), 48);
  EXPECT_EQ(c.last_sliding_donor, 46);
  EXPECT_EQ(c.last_full_donor, 47);
  for (const auto& g : c.layers) {
    const bool full = g.index % 6 == 5;
    EXPECT_EQ(g.k_eq_v, full);
    EXPECT_EQ(g.num_kv_heads, full ? 1 : 8);
    EXPECT_EQ(g.head_dim, full ? 512 : 256);
    EXPECT_EQ(g.kv_source, g.index);
    EXPECT_EQ(g.mlp_width, 15360);
  }
}

TEST(ConfigGeometry, Moe26B) {
  const TargetConfig c = parse(k26B);
  EXPECT_EQ(count_donors(c), 30);
  EXPECT_EQ(c.last_sliding_donor, 28);
  EXPECT_EQ(c.last_full_donor, 29);
  EXPECT_TRUE(c.text.enable_moe_block);
  EXPECT_EQ(c.text.num_experts, 128);
  EXPECT_EQ(c.text.top_k_experts, 8);
  EXPECT_EQ(c.text.moe_intermediate_size, 704);
  std::vector<int> full;
  for (const auto& g : c.layers)
    if (g.type == LayerType::Full) full.push_back(g.index);
  EXPECT_EQ(full, (std::vector<int>{5, 11, 17, 23, 29}));
  EXPECT_EQ(c.layers[5].num_kv_heads, 2);
  EXPECT_EQ(c.layers[4].num_kv_heads, 8);
}

TEST(ConfigGeometry, Dense31B) {
  const TargetConfig c = parse(k31B);
  EXPECT_EQ(count_donors(c), 60);
  EXPECT_EQ(c.last_sliding_donor, 58);
  EXPECT_EQ(c.last_full_donor, 59);
  EXPECT_EQ(c.layers[59].num_kv_heads, 4);
  EXPECT_EQ(c.layers[58].num_kv_heads, 16);
  EXPECT_EQ(c.layers[0].mlp_width, 21504);
}

TEST(ConfigGeometry, SharerWithoutDonorOfItsTypeIsAnError) {
  json t = text_config(kE4B);
  t["num_hidden_layers"] = 4;
  t["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"};
  t["num_kv_shared_layers"] = 1;  // layer 3 (full) shares, but layers 0..2 are all sliding
  expect_error([&] { parse_target_config(wrap(t), "cfg.json"); },
               {"cfg.json", "layer 3", "full_attention", "no donor"});
}

TEST(ConfigGeometry, DoubleWideOnlyWhenSharingIsActive) {
  json t = text_config(kE2B);
  t["num_kv_shared_layers"] = 0;
  const TargetConfig c = parse_target_config(wrap(t), "c.json");
  for (const auto& g : c.layers) EXPECT_EQ(g.mlp_width, 6144);
}

TEST(ConfigTarget, FlatTextConfigMatchesNested) {
  json flat = text_config(kE4B);
  flat["eos_token_id"] = {1, 106};
  const TargetConfig a = parse_target_config(flat, "flat.json");
  const TargetConfig b = parse(kE4B);
  EXPECT_EQ(a.model_type, "gemma4_text");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].kv_source, b.layers[i].kv_source);
    EXPECT_EQ(a.layers[i].head_dim, b.layers[i].head_dim);
  }
  EXPECT_EQ(a.eos_token_ids, (std::vector<int>{1, 106}));
  EXPECT_EQ(a.text.hidden_size, 2560);
}

TEST(ConfigTarget, TokenIdsFallBackFromTextToTopLevel) {
  json raw = wrap(text_config(kE4B));
  raw["text_config"]["eos_token_id"] = 1;  // int form; top level adds 106
  raw["text_config"]["pad_token_id"] = 0;
  const TargetConfig c = parse_target_config(raw, "c.json");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{1, 106}));
  EXPECT_EQ(c.bos_token_id, 2);  // only at top level
  raw["text_config"]["bos_token_id"] = 7;
  EXPECT_EQ(parse_target_config(raw, "c.json").bos_token_id, 7);
  raw["eos_token_id"] = "x";
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"eos_token_id", "token id"});
}

TEST(ConfigTarget, TopLevelVocabSizeWinsOnlyWithoutConflict) {
  json raw = wrap(text_config(kE4B));
  raw["vocab_size"] = 262144;
  EXPECT_EQ(parse_target_config(raw, "c.json").text.vocab_size, 262144);
  raw["vocab_size"] = 1000;
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"vocab_size", "1000", "262144"});
}

TEST(ConfigTarget, MissingAndMistypedRequiredKeys) {
  for (const char* k : {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                        "intermediate_size", "vocab_size", "sliding_window", "rms_norm_eps"}) {
    json raw = wrap(text_config(kE4B));
    raw["text_config"].erase(k);
    expect_error([&] { parse_target_config(raw, "/m/config.json"); },
                 {"/m/config.json", std::string("'text_config.") + k + "'", "missing"});
  }
  json raw = wrap(text_config(kE4B));
  raw["text_config"]["hidden_size"] = "2560";
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"text_config.hidden_size", "integer", "string"});
  raw = wrap(text_config(kE4B));
  raw["text_config"]["num_attention_heads"] = 8.5;
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"text_config.num_attention_heads", "integer"});
  raw = wrap(text_config(kE4B));
  raw["text_config"]["attention_k_eq_v"] = 1;
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"text_config.attention_k_eq_v", "true or false"});
  raw = wrap(text_config(kE4B));
  raw["text_config"]["hidden_size"] = -4;
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"text_config.hidden_size", "-4"});
  raw = wrap(text_config(kE4B));
  raw["text_config"]["num_hidden_layers"] = nullptr;
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"text_config.num_hidden_layers", "missing"});
}

TEST(ConfigTarget, LayerTypes) {
  json raw = wrap(text_config(kE4B));
  raw["text_config"]["layer_types"].erase(0);
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"layer_types", "41", "num_hidden_layers", "42"});
  raw = wrap(text_config(kE4B));
  raw["text_config"]["layer_types"][3] = "chunked_attention";
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"layer_types[3]", "chunked_attention"});
  // sliding_window_pattern is used only without layer_types, and only when it divides the count.
  raw = wrap(text_config(kE4B));
  raw["text_config"].erase("layer_types");
  raw["text_config"]["sliding_window_pattern"] = 6;
  const TargetConfig c = parse_target_config(raw, "c.json");
  EXPECT_EQ(c.last_full_donor, 23);
  raw["text_config"]["sliding_window_pattern"] = 5;
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"sliding_window_pattern", "does not divide"});
  raw["text_config"].erase("sliding_window_pattern");
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"text_config.layer_types", "missing"});
}

TEST(ConfigTarget, ActivationSoftcapAndModelType) {
  json raw = wrap(text_config(kE4B));
  raw["text_config"]["hidden_activation"] = "gelu";
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"hidden_activation", "gelu_pytorch_tanh"});
  raw = wrap(text_config(kE4B));
  raw["text_config"].erase("final_logit_softcapping");
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"text_config.final_logit_softcapping", "missing"});
  raw["text_config"]["final_logit_softcapping"] = nullptr;  // explicit "no softcapping"
  EXPECT_FALSE(parse_target_config(raw, "c.json").text.final_logit_softcapping.has_value());
  raw["model_type"] = "llama";
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"llama", "Gemma 4"});
}

TEST(ConfigTarget, RopeParameters) {
  json raw = wrap(text_config(k12B));
  raw["text_config"].erase("rope_parameters");
  TargetConfig c = parse_target_config(raw, "c.json");  // docs/gemma4.md §2.3 defaults
  EXPECT_EQ(c.text.rope_sliding.type, "default");
  EXPECT_DOUBLE_EQ(c.text.rope_sliding.theta, 10000.0);
  EXPECT_EQ(c.text.rope_full.type, "proportional");
  EXPECT_DOUBLE_EQ(c.text.rope_full.theta, 1000000.0);
  EXPECT_DOUBLE_EQ(c.text.rope_full.partial_rotary_factor, 0.25);
  EXPECT_DOUBLE_EQ(c.layers[5].rope.partial_rotary_factor, 0.25);
  raw["text_config"]["rope_parameters"] = {
      {"sliding_attention", {{"type", "linear"}, {"rope_theta", 5.0}, {"factor", 2.0}}}};
  c = parse_target_config(raw, "c.json");
  EXPECT_EQ(c.text.rope_sliding.type, "linear");  // `type` alias
  EXPECT_DOUBLE_EQ(c.text.rope_sliding.factor, 2.0);
  EXPECT_DOUBLE_EQ(c.text.rope_sliding.partial_rotary_factor, 1.0);
  raw["text_config"]["rope_parameters"]["full_attention"] = {{"rope_type", "yarn"}, {"rope_theta", 1.0}};
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"rope_parameters.full_attention.rope_type", "yarn"});
}

TEST(ConfigTarget, KeysWithStackDependentDefaultsAreLeftToTheLoader) {
  json raw = wrap(text_config(kE4B));
  for (const char* k : {"num_kv_shared_layers", "hidden_size_per_layer_input", "use_double_wide_mlp", "global_head_dim",
                        "attention_k_eq_v", "enable_moe_block"})
    raw["text_config"].erase(k);
  raw["text_config"].erase("tie_word_embeddings");
  raw.erase("tie_word_embeddings");
  const TargetConfig c = parse_target_config(raw, "c.json");
  for (const char* k : {"num_kv_shared_layers", "hidden_size_per_layer_input", "use_double_wide_mlp", "global_head_dim",
                        "attention_k_eq_v", "enable_moe_block", "tie_word_embeddings"})
    EXPECT_TRUE(c.text.needs_inference(k)) << k;
  EXPECT_FALSE(c.text.needs_inference("hidden_size"));
}

TEST(ConfigTarget, MoeNeedsTopK) {
  json raw = wrap(text_config(k26B));
  raw["text_config"].erase("top_k_experts");
  expect_error([&] { parse_target_config(raw, "c.json"); }, {"enable_moe_block", "text_config.top_k_experts"});
}

// ---- quantization ----------------------------------------------------------------------------

TEST(ConfigTarget, ExpertWidthUnderEitherName) {
  json t = text_config(k26B);
  t.erase("moe_intermediate_size");
  t["expert_intermediate_size"] = 704;
  EXPECT_EQ(parse_target_config(wrap(t), "e.json").text.moe_intermediate_size, 704);
  t["moe_intermediate_size"] = 704;  // both, agreeing
  EXPECT_EQ(parse_target_config(wrap(t), "e.json").text.moe_intermediate_size, 704);
  t["moe_intermediate_size"] = 640;
  expect_error([&] { parse_target_config(wrap(t), "e.json"); },
               {"e.json", "text_config.moe_intermediate_size' = 640", "text_config.expert_intermediate_size' = 704"});
}

TEST(ConfigQuantization, AbsentBlockMeansDense) {
  EXPECT_FALSE(parse_quantization(json{{"model_type", "gemma4"}}, "c.json").present);
}

TEST(ConfigQuantization, QuantizationKeyWinsOverQuantizationConfig) {
  json raw = {{"quantization", {{"bits", 8}, {"group_size", 32}, {"mode", "affine"}}},
              {"quantization_config", {{"bits", 4}, {"group_size", 64}}}};
  QuantizationConfig q = parse_quantization(raw, "c.json");
  EXPECT_TRUE(q.present);
  EXPECT_EQ(q.block_key, "quantization");
  EXPECT_EQ(q.defaults, (QuantSpec{8, 32, "affine"}));
  raw.erase("quantization");
  q = parse_quantization(raw, "c.json");
  EXPECT_EQ(q.block_key, "quantization_config");
  EXPECT_EQ(q.defaults, (QuantSpec{4, 64, "affine"}));
}

TEST(ConfigQuantization, OverridesFalseAndPartial) {
  const json raw = {{"quantization",
                     {{"bits", 4},
                      {"group_size", 64},
                      {"language_model.model.layers.0.router.proj", {{"group_size", 64}, {"bits", 8}}},
                      {"language_model.model.embed_tokens", {{"bits", 6}}},
                      {"language_model.model.layers.1.mlp.down_proj", {{"group_size", 128}}},
                      {"language_model.model.layers.2.router.proj", false}}}};
  const QuantizationConfig q = parse_quantization(raw, "c.json");
  EXPECT_EQ(q.spec_for("language_model.model.layers.0.router.proj"), (QuantSpec{8, 64, "affine"}));
  EXPECT_EQ(q.spec_for("language_model.model.embed_tokens"), (QuantSpec{6, 64, "affine"}));  // inherits group
  EXPECT_EQ(q.spec_for("language_model.model.layers.1.mlp.down_proj"), (QuantSpec{4, 128, "affine"}));
  EXPECT_EQ(q.spec_for("language_model.model.layers.3.mlp.down_proj"), (QuantSpec{4, 64, "affine"}));
  ASSERT_TRUE(q.overrides.count("language_model.model.layers.2.router.proj"));
  EXPECT_FALSE(q.overrides.at("language_model.model.layers.2.router.proj").has_value());
  expect_error([&] { q.spec_for("language_model.model.layers.2.router.proj"); },
               {"language_model.model.layers.2.router.proj", "not quantized"});
}

// A converted GGUF image promises shared factors per module (kernels/shared_scales.h).
TEST(ConfigQuantization, SuperblockPerModule) {
  const json raw = {{"quantization",
                     {{"bits", 4},
                      {"group_size", 32},
                      {"m.down_proj", {{"bits", 4}, {"group_size", 32}, {"superblock", 256}}},
                      {"m.head", {{"bits", 8}, {"group_size", 16}, {"superblock", 256}}}}}};
  const QuantizationConfig q = parse_quantization(raw, "c.json");
  EXPECT_EQ(q.spec_for("m.down_proj"), (QuantSpec{4, 32, "affine", 256}));
  EXPECT_EQ(q.spec_for("m.head"), (QuantSpec{8, 16, "affine", 256}));
  EXPECT_EQ(q.spec_for("m.other").superblock, 0);
  const QuantizationConfig narrow = parse_quantization(
      json{{"quantization",
            {{"bits", 4}, {"group_size", 32}, {"m.head", {{"bits", 8}, {"group_size", 16}, {"code_bits", 6}}}}}},
      "c.json");
  EXPECT_EQ(narrow.spec_for("m.head").code_bits, 6);
  EXPECT_EQ(narrow.spec_for("m.other").code_bits, 0);
  expect_error(
      [] {
        parse_quantization(json{{"quantization", {{"bits", 4}, {"group_size", 32}, {"m", {{"superblock", 5000}}}}}},
                           "c.json");
      },
      {"c.json", "superblock", "5000"});
}

TEST(ConfigQuantization, Rejections) {
  expect_error(
      [] {
        parse_quantization(json{{"quantization_config", {{"quant_method", "mxfp4"}}}}, "c.json");
      },
      {"c.json", "quant_method", "mxfp4", "MLX affine"});
  expect_error(
      [] {
        parse_quantization(json{{"quantization", {{"bits", 4}, {"group_size", 32}, {"mode", "mxfp4"}}}}, "c.json");
      },
      {"quantization.mode", "mxfp4", "affine"});
  expect_error(
      [] {
        parse_quantization(json{{"quantization", {{"bits", 7}, {"group_size", 64}}}}, "c.json");
      },
      {"quantization.bits", "7"});
  expect_error(
      [] {
        parse_quantization(json{{"quantization", {{"bits", 4}, {"group_size", 8}}}}, "c.json");
      },
      {"quantization.group_size", "8", "16, 32, 64, 128"});
  expect_error(
      [] {
        parse_quantization(json{{"quantization", {{"group_size", 64}}}}, "c.json");
      },
      {"quantization.bits", "missing"});
  expect_error(
      [] {
        parse_quantization(json{{"quantization", {{"bits", 4}, {"group_size", 64}, {"m.x", {{"bits", 1}}}}}}, "c.json");
      },
      {"m.x", "bits", "1"});
  expect_error(
      [] {
        parse_quantization(json{{"quantization", {{"bits", 4}, {"group_size", 64}, {"m.x", true}}}}, "c.json");
      },
      {"m.x", "false"});
  expect_error([] { parse_quantization(json{{"quantization", "4bit"}}, "c.json"); }, {"quantization", "object"});
}

// ---- drafter and generation configs ---------------------------------------------------------

json drafter_json() {
  json t = {{"model_type", "gemma4_text"},
            {"hidden_size", 256},
            {"num_hidden_layers", 4},
            {"layer_types", {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"head_dim", 256},
            {"global_head_dim", 512},
            {"intermediate_size", 2048},
            {"num_kv_shared_layers", 4},
            {"hidden_size_per_layer_input", 0},
            {"sliding_window", 512},
            {"vocab_size", 262144},
            {"rms_norm_eps", 1e-6},
            {"final_logit_softcapping", nullptr}};
  return {{"model_type", "gemma4_assistant"},  {"backbone_hidden_size", 2560},
          {"use_ordered_embeddings", true},    {"num_centroids", 2048},
          {"centroid_intermediate_top_k", 32}, {"tie_word_embeddings", true},
          {"eos_token_id", {1, 106, 50}},      {"text_config", t}};
}

TEST(ConfigDrafter, ParsesE4BAssistant) {
  const DrafterConfig d = parse_drafter_config(drafter_json(), "d.json");
  EXPECT_EQ(d.backbone_hidden_size, 2560);
  EXPECT_EQ(d.use_ordered_embeddings, std::optional<bool>(true));
  EXPECT_EQ(d.num_centroids, 2048);
  EXPECT_EQ(d.centroid_intermediate_top_k, 32);
  EXPECT_EQ(d.eos_token_ids, (std::vector<int>{1, 106, 50}));
  ASSERT_EQ(d.layers.size(), 4u);
  for (const auto& g : d.layers) {
    EXPECT_FALSE(g.kv_donor);
    EXPECT_EQ(g.kv_source, -1);
  }
  EXPECT_EQ(d.layers[3].head_dim, 512);
  EXPECT_EQ(d.layers[0].head_dim, 256);
  EXPECT_FALSE(d.text.final_logit_softcapping.has_value());
}

TEST(ConfigDrafter, Errors) {
  json raw = drafter_json();
  raw["model_type"] = "gemma4_unified_assistant";  // both spellings accepted
  EXPECT_NO_THROW(parse_drafter_config(raw, "d.json"));
  raw["model_type"] = "gemma4";
  expect_error([&] { parse_drafter_config(raw, "d.json"); }, {"d.json", "gemma4", "assistant"});
  raw = drafter_json();
  raw.erase("backbone_hidden_size");
  expect_error([&] { parse_drafter_config(raw, "d.json"); }, {"'backbone_hidden_size'", "missing"});
  raw = drafter_json();
  raw["text_config"]["num_kv_shared_layers"] = 2;
  expect_error([&] { parse_drafter_config(raw, "d.json"); }, {"num_kv_shared_layers", "2", "4"});
  raw = drafter_json();
  raw["text_config"].erase("num_kv_shared_layers");  // all layers shared by definition
  EXPECT_EQ(parse_drafter_config(raw, "d.json").text.num_kv_shared_layers, 4);
  raw.erase("text_config");
  expect_error([&] { parse_drafter_config(raw, "d.json"); }, {"text_config", "missing"});
}

TEST(ConfigGeneration, ParsesObservedFile) {
  const json raw = {{"bos_token_id", 2},
                    {"do_sample", true},
                    {"eos_token_id", {1, 106, 50}},
                    {"pad_token_id", 0},
                    {"suppress_tokens", {258883, 258882}},
                    {"temperature", 1.0},
                    {"top_k", 64},
                    {"top_p", 0.95},
                    {"num_assistant_tokens", 6}};
  const GenerationConfig g = parse_generation_config(raw, "g.json");
  EXPECT_EQ(g.bos_token_id, std::optional<int>(2));
  EXPECT_EQ(g.eos_token_ids, (std::vector<int>{1, 106, 50}));
  EXPECT_EQ(g.suppress_tokens, (std::vector<int>{258883, 258882}));
  EXPECT_EQ(g.top_k, std::optional<int>(64));
  EXPECT_DOUBLE_EQ(*g.top_p, 0.95);
  EXPECT_EQ(g.num_assistant_tokens, std::optional<int>(6));
  EXPECT_FALSE(g.min_p.has_value());
  EXPECT_EQ(parse_generation_config(json{{"eos_token_id", 1}}, "g.json").eos_token_ids, (std::vector<int>{1}));
  expect_error([] { parse_generation_config(json{{"top_p", 2.0}}, "g.json"); }, {"g.json", "top_p"});
  expect_error([] { parse_generation_config(json{{"top_k", "64"}}, "g.json"); }, {"g.json", "top_k", "integer"});
}

TEST(ConfigJsonFile, SyntaxErrorNamesFileLineAndColumn) {
  std::string tmpl = (fs::temp_directory_path() / "specula-cfg-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string path = tmpl + "/config.json";
  {
    std::ofstream out(path);
    out << "{\n  \"a\": 1,\n  \"b\": ]\n}\n";
  }
  expect_error([&] { read_json_file(path); }, {path + ":3:", "invalid JSON"});
  {
    std::ofstream out(path);
    out << "{\"a\": [1, 2]}";
  }
  EXPECT_EQ(read_json_file(path)["a"][1], 2);
  expect_error([&] { read_json_file(tmpl + "/absent.json"); }, {"absent.json", "cannot open"});
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace specula
