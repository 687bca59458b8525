// Checkpoint loading (docs/gemma4.md §3, §7): every golden target and drafter loads with the right
// resolved facts, golden pairs are compatible, and broken copies of the goldens (edited configs,
// rewritten safetensors) fail with messages naming the tensor, the key and both values.
#include "specula/io/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_of.h"
#include "specula/io/towers.h"
#include "specula/io/weight_files.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using nlohmann::json;
using test::expect_error;
namespace fs = std::filesystem;

const std::string kGoldens = std::string(SPECULA_TEST_DATA) + "/goldens";

const std::vector<std::string> kCases = {
    "dense-bf16-hf",    "dense-densehead-bf16",   "dense-q5g64-window4", "dense-q6g128-mlx",
    "e4b-like-bf16-hf", "e4b-like-q2g32-window6", "e4b-like-q4g64-mlx",  "kveq-densehead-random",
    "kveq-q3g32-mlx",   "kveq-q8g64-mlx",         "moe-f32-hf",          "moe-q4g64-mlx"};

std::string golden(const std::string& name, const char* part) { return kGoldens + "/" + name + "/" + part; }

// A writable copy of a golden checkpoint directory, removed at scope exit.
class Copy {
 public:
  Copy(const std::string& name, const char* part) {
    std::string tmpl = (fs::temp_directory_path() / "specula-ck-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    root_ = tmpl;
    fs::copy(golden(name, part), dir());
  }
  ~Copy() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string dir() const { return (root_ / "ck").string(); }
  std::string config_path() const { return dir() + "/config.json"; }

  json config() const { return read_json_file(config_path()); }
  void set_config(const json& j) const { std::ofstream(config_path()) << j.dump(2); }
  void edit_config(const std::function<void(json&)>& f) const {
    json j = config();
    f(j);
    set_config(j);
  }
  // Rewrites model.safetensors through `edit`, which sees each tensor (name, dtype, shape, bytes)
  // and returns false to drop it.
  void edit_tensors(const std::function<bool(std::string&, std::vector<std::byte>&)>& edit) const {
    const std::string path = dir() + "/model.safetensors";
    std::vector<TensorSpec> specs;
    {
      const SafetensorsFile f = SafetensorsFile::open(path);
      for (const TensorView& t : f.tensors()) {
        std::string name = t.name;
        std::vector<std::byte> bytes(t.data, t.data + t.nbytes);
        if (edit(name, bytes)) specs.push_back(tensor_from_bytes(name, t.dtype, t.shape, std::move(bytes)));
      }
    }
    write_safetensors(path, specs);
  }
  void drop_tensor(const std::string& name) const {
    edit_tensors([&](std::string& n, std::vector<std::byte>&) { return n != name; });
  }

 private:
  fs::path root_;
};

// ---- goldens --------------------------------------------------------------------------------

TEST(CheckpointGoldens, EveryTargetAndDrafterLoadsAndIsCompatible) {
  for (const std::string& name : kCases) {
    SCOPED_TRACE(name);
    const TargetCheckpoint t = load_target(golden(name, "model"));
    const DrafterCheckpoint d = load_drafter(golden(name, "drafter"));
    EXPECT_TRUE(t.config.text.keys_to_infer.empty());
    EXPECT_TRUE(d.config.text.keys_to_infer.empty());
    const bool hf = name.find("-hf") != std::string::npos || name.find("bf16") != std::string::npos ||
                    name.find("random") != std::string::npos;
    EXPECT_EQ(t.prefix, hf ? "model.language_model." : "language_model.model.");
    EXPECT_EQ(t.embed_tokens.quantized, t.config.quantization.present);
    EXPECT_EQ(t.embed_tokens.scales != nullptr, t.config.quantization.present);
    EXPECT_EQ(t.embed_tokens.biases != nullptr, t.config.quantization.present);
    ASSERT_EQ(t.layers.size(), static_cast<size_t>(t.config.text.num_hidden_layers));
    for (size_t i = 0; i < t.layers.size(); ++i) {
      const LayerGeometry& g = t.config.layers[i];
      const TargetLayerModules& m = t.layers[i];
      EXPECT_NE(m.layer_scalar, nullptr);
      EXPECT_EQ(m.k_proj.has_value(), g.kv_donor) << i;  // sharers' k/v are never used
      EXPECT_EQ(m.v_proj.has_value(), g.kv_donor && !g.k_eq_v) << i;
      EXPECT_EQ(m.gate_proj.shape[0], g.mlp_width) << i;
      EXPECT_EQ(m.q_proj.shape[0], t.config.text.num_attention_heads * g.head_dim);
    }
    const bool centroid = name.find("densehead") == std::string::npos;
    EXPECT_EQ(d.centroid_head, centroid);
    EXPECT_EQ(d.centroids.has_value(), centroid);
    EXPECT_EQ(d.token_ordering != nullptr, centroid);
    EXPECT_EQ(d.pre_projection.shape, (std::vector<int64_t>{d.config.text.hidden_size, 2 * t.config.text.hidden_size}));
    EXPECT_EQ(d.layers.size(), 4u);
    const std::vector<std::string> problems = check_drafter_compat(t.config, d.config);
    EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems[0]);
  }
}

TEST(CheckpointGoldens, ResolvedFacts) {
  {  // MoE MLX: router.proj 8-bit by override, the rest 4-bit; split experts.
    const TargetCheckpoint t = load_target(golden("moe-q4g64-mlx", "model"));
    const TargetLayerModules& l0 = t.layers[0];
    ASSERT_TRUE(l0.router_proj.has_value());
    EXPECT_TRUE(l0.router_proj->quantized);
    EXPECT_EQ(l0.router_proj->quant.bits, 8);
    EXPECT_EQ(l0.router_proj->quant.group_size, 64);
    EXPECT_EQ(l0.gate_proj.quant.bits, 4);
    ASSERT_TRUE(l0.experts_gate.has_value());
    EXPECT_FALSE(l0.experts_gate_up.has_value());
    EXPECT_EQ(l0.experts_gate->shape, (std::vector<int64_t>{8, 64, 128}));
    EXPECT_EQ(l0.experts_down->shape, (std::vector<int64_t>{8, 128, 64}));
    EXPECT_NE(l0.router_scale, nullptr);
    EXPECT_NE(l0.post_feedforward_layernorm_2, nullptr);
    EXPECT_FALSE(t.layers[1].v_proj.has_value());  // full layer with k_eq_v
    EXPECT_EQ(t.config.layers[1].num_kv_heads, 1);
  }
  {  // MoE HF: fused gate_up experts stored without a .weight suffix, f32.
    const TargetCheckpoint t = load_target(golden("moe-f32-hf", "model"));
    ASSERT_TRUE(t.layers[0].experts_gate_up.has_value());
    EXPECT_EQ(t.layers[0].experts_gate_up->shape, (std::vector<int64_t>{8, 128, 128}));
    EXPECT_EQ(t.layers[0].experts_gate_up->dtype(), DType::F32);
    EXPECT_FALSE(t.layers[0].experts_gate.has_value());
  }
  {  // k_eq_v: full layers have no v_proj.
    const TargetCheckpoint t = load_target(golden("kveq-q3g32-mlx", "model"));
    for (size_t i = 0; i < t.layers.size(); ++i)
      EXPECT_EQ(t.layers[i].v_proj.has_value(), t.config.layers[i].type == LayerType::Sliding) << i;
    EXPECT_EQ(t.embed_tokens.quant, (QuantSpec{3, 32, "affine"}));
  }
  {  // PLE + KV sharing + double-wide MLP on sharers.
    const TargetCheckpoint t = load_target(golden("e4b-like-q4g64-mlx", "model"));
    EXPECT_EQ(t.config.first_shared_layer, 4);
    EXPECT_EQ(t.config.last_sliding_donor, 2);
    EXPECT_EQ(t.config.last_full_donor, 3);
    EXPECT_EQ(t.config.layers[5].kv_source, 2);
    EXPECT_EQ(t.config.layers[7].kv_source, 3);
    EXPECT_EQ(t.layers[5].gate_proj.shape[0], 512);
    EXPECT_EQ(t.layers[0].gate_proj.shape[0], 256);
    ASSERT_TRUE(t.embed_tokens_per_layer.has_value());
    EXPECT_EQ(t.embed_tokens_per_layer->shape, (std::vector<int64_t>{512, 256}));
    EXPECT_FALSE(t.layers[0].per_layer_projection->quantized);  // in-dim 32 < group 64: stays bf16
    EXPECT_TRUE(t.layers[0].per_layer_input_gate->quantized);
    EXPECT_GT(t.layers[0].per_layer_input_gate->nbytes(), 0u);
  }
}

TEST(CheckpointGoldens, MismatchedPairIsIncompatible) {
  const TargetCheckpoint t = load_target(golden("dense-bf16-hf", "model"));
  const DrafterCheckpoint d = load_drafter(golden("e4b-like-q2g32-window6", "drafter"));  // backbone 192
  const auto problems = check_drafter_compat(t.config, d.config);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("backbone_hidden_size = 192"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("hidden_size = 128"), std::string::npos) << problems[0];
}

TEST(CheckpointGoldens, CompatChecksConfigValues) {
  const TargetCheckpoint t = load_target(golden("kveq-q8g64-mlx", "model"));
  const json raw = read_json_file(golden("kveq-q8g64-mlx", "drafter") + "/config.json");
  json edited = raw;
  edited["backbone_hidden_size"] = 256;
  auto problems = check_drafter_compat(t.config, parse_drafter_config(edited, "d.json"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("backbone_hidden_size = 256 (d.json)"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("hidden_size = 128"), std::string::npos) << problems[0];
  edited = raw;
  edited["text_config"]["global_head_dim"] = 128;
  edited["text_config"]["sliding_window"] = 16;
  problems = check_drafter_compat(t.config, parse_drafter_config(edited, "d.json"));
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("sliding_window = 16"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("global_head_dim = 128"), std::string::npos) << problems[1];
  EXPECT_NE(problems[1].find("head dim 64"), std::string::npos) << problems[1];
  edited = raw;
  edited["text_config"]["num_attention_heads"] = 3;  // GQA over 2 sliding KV heads impossible
  problems = check_drafter_compat(t.config, parse_drafter_config(edited, "d.json"));
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("num_attention_heads = 3"), std::string::npos) << problems[0];
}

// A data-less inventory (TensorStore::from_views) validates like the real files.
TEST(CheckpointGoldens, InventoryWithoutDataValidates) {
  for (const char* part : {"model", "drafter"}) {
    const std::string dir = golden("moe-q4g64-mlx", part);
    std::vector<TensorView> views = SafetensorsFile::open(dir + "/model.safetensors").tensors();
    for (TensorView& v : views) {
      v.data = nullptr;
      v.file = nullptr;
    }
    const json raw = read_json_file(dir + "/config.json");
    if (std::string(part) == "model") {
      const TargetCheckpoint t = load_target(raw, "plan.json", TensorStore::from_views(dir, views));
      EXPECT_EQ(t.layers.size(), 4u);
      EXPECT_EQ(t.layers[0].router_proj->quant.bits, 8);
      EXPECT_FALSE(t.generation.has_value());
      views.erase(
          std::remove_if(views.begin(), views.end(),
                         [](const TensorView& v) { return v.name.find("layers.3.mlp.up_proj") != std::string::npos; }),
          views.end());
      expect_error([&] { load_target(raw, "plan.json", TensorStore::from_views(dir, views)); },
                   {"missing tensor language_model.model.layers.3.mlp.up_proj.weight"});
    } else {
      const DrafterCheckpoint d = load_drafter(raw, "plan.json", TensorStore::from_views(dir, views));
      EXPECT_TRUE(d.centroid_head);
      EXPECT_NE(d.token_ordering, nullptr);
    }
  }
}

// ---- inference of absent keys ------------------------------------------------------------------

TEST(CheckpointInference, AbsentStackDependentKeysComeFromTensorShapes) {
  const Copy c("e4b-like-q4g64-mlx", "model");
  c.edit_config([](json& j) {
    for (const char* k :
         {"num_kv_shared_layers", "use_double_wide_mlp", "hidden_size_per_layer_input", "vocab_size_per_layer_input",
          "global_head_dim", "attention_k_eq_v", "enable_moe_block", "tie_word_embeddings"})
      j["text_config"].erase(k);
    j.erase("tie_word_embeddings");
  });
  const TargetCheckpoint t = load_target(c.dir());
  const TextConfig& x = t.config.text;
  EXPECT_TRUE(x.keys_to_infer.empty());
  EXPECT_EQ(x.num_kv_shared_layers, 4);
  EXPECT_TRUE(x.use_double_wide_mlp);
  EXPECT_EQ(x.hidden_size_per_layer_input, 32);
  EXPECT_EQ(x.vocab_size_per_layer_input, 512);
  EXPECT_EQ(x.global_head_dim, 64);
  EXPECT_FALSE(x.attention_k_eq_v);
  EXPECT_FALSE(x.enable_moe_block);
  EXPECT_TRUE(x.tie_word_embeddings);
  EXPECT_EQ(t.config.last_sliding_donor, 2);
  EXPECT_EQ(t.config.layers[6].kv_source, 2);
  EXPECT_EQ(t.config.layers[7].mlp_width, 512);
}

TEST(CheckpointInference, KEqVAndMoeFromTensors) {
  const Copy c("moe-q4g64-mlx", "model");
  c.edit_config([](json& j) {
    for (const char* k : {"attention_k_eq_v", "enable_moe_block", "num_experts", "moe_intermediate_size"})
      j["text_config"].erase(k);
  });
  const TargetCheckpoint t = load_target(c.dir());
  EXPECT_TRUE(t.config.text.attention_k_eq_v);
  EXPECT_TRUE(t.config.text.enable_moe_block);
  EXPECT_EQ(t.config.text.num_experts, 8);
  EXPECT_EQ(t.config.text.moe_intermediate_size, 64);
  c.edit_config([](json& j) { j["text_config"].erase("top_k_experts"); });
  expect_error([&] { load_target(c.dir()); }, {"text_config.top_k_experts", "router.proj"});
}

// ---- broken targets ------------------------------------------------------------------------------

TEST(CheckpointErrors, FourBitConfigWithEightBitTensors) {
  const Copy c("kveq-q8g64-mlx", "model");
  c.edit_config([](json& j) {
    j["quantization"]["bits"] = 4;
    j["quantization_config"]["bits"] = 4;
  });
  expect_error([&] { load_target(c.dir()); },
               {"language_model.model.embed_tokens.weight", "[512, 32]", "quantization.bits/group_size", "bits 4",
                "[512, 16]", "look like bits 8, group_size 64"});
}

TEST(CheckpointErrors, OverrideBitsDisagreeWithTensor) {
  const Copy c("moe-q4g64-mlx", "model");
  c.edit_config([](json& j) { j["quantization"]["language_model.model.layers.0.router.proj"]["bits"] = 4; });
  expect_error([&] { load_target(c.dir()); },
               {"language_model.model.layers.0.router.proj.weight", "[8, 32]",
                "quantization[\"language_model.model.layers.0.router.proj\"]", "[8, 16]"});
}

TEST(CheckpointErrors, OverrideFalseWithScales) {
  const Copy c("moe-q4g64-mlx", "model");
  c.edit_config([](json& j) { j["quantization"]["language_model.model.layers.2.router.proj"] = false; });
  expect_error([&] { load_target(c.dir()); },
               {"language_model.model.layers.2.router.proj.scales", "not quantized", "= false"});
}

TEST(CheckpointErrors, QuantizedTensorsWithoutQuantizationBlock) {
  const Copy c("kveq-q8g64-mlx", "model");
  c.edit_config([](json& j) {
    j.erase("quantization");
    j.erase("quantization_config");
  });
  expect_error([&] { load_target(c.dir()); }, {"language_model.model.embed_tokens.scales", "no 'quantization' block"});
}

TEST(CheckpointErrors, OverrideNamingNoModule) {
  const Copy c("moe-q4g64-mlx", "model");
  c.edit_config([](json& j) { j["quantization"]["language_model.model.layers.0.router.prj"] = {{"bits", 8}}; });
  expect_error([&] { load_target(c.dir()); }, {"language_model.model.layers.0.router.prj", "names no module"});
}

TEST(CheckpointErrors, WrongNumAttentionHeads) {
  const Copy c("dense-bf16-hf", "model");
  c.edit_config([](json& j) { j["text_config"]["num_attention_heads"] = 2; });
  expect_error([&] { load_target(c.dir()); }, {"model.language_model.layers.0.self_attn.q_proj.weight", "dim 0 is 128",
                                               "text_config.num_attention_heads (2)", "= 64"});
}

TEST(CheckpointErrors, WrongIntermediateSize) {
  const Copy c("e4b-like-bf16-hf", "model");
  c.edit_config([](json& j) { j["text_config"]["intermediate_size"] = 384; });
  expect_error([&] { load_target(c.dir()); }, {"model.language_model.layers.0.mlp.gate_proj.weight", "dim 0 is 256",
                                               "text_config.intermediate_size", "384"});
}

TEST(CheckpointErrors, DoubleWideFlagDisagreesWithSharerWidth) {
  const Copy c("e4b-like-bf16-hf", "model");
  c.edit_config([](json& j) { j["text_config"]["use_double_wide_mlp"] = false; });
  expect_error([&] { load_target(c.dir()); }, {"model.language_model.layers.4.mlp.gate_proj.weight", "dim 0 is 512",
                                               "text_config.use_double_wide_mlp false", "= 256"});
}

TEST(CheckpointErrors, LayerScalarMissingOnOneLayer) {
  const Copy c("dense-bf16-hf", "model");
  c.drop_tensor("model.language_model.layers.1.layer_scalar");
  expect_error([&] { load_target(c.dir()); },
               {"missing tensor model.language_model.layers.1.layer_scalar", "every layer or on none"});
}

TEST(CheckpointErrors, LayerScalarAbsentEverywhereMeansOne) {
  const Copy c("dense-bf16-hf", "model");
  c.edit_tensors([](std::string& n, std::vector<std::byte>&) { return n.find("layer_scalar") == std::string::npos; });
  const TargetCheckpoint t = load_target(c.dir());
  for (const auto& l : t.layers) EXPECT_EQ(l.layer_scalar, nullptr);
}

TEST(CheckpointErrors, DonorWithoutKProj) {
  const Copy c("dense-bf16-hf", "model");
  c.drop_tensor("model.language_model.layers.0.self_attn.k_proj.weight");
  expect_error([&] { load_target(c.dir()); },
               {"missing tensor model.language_model.layers.0.self_attn.k_proj.weight", "owns a KV cache"});
}

TEST(CheckpointErrors, KEqVMismatches) {
  {  // config says k_eq_v but the full layers carry a v_proj
    const Copy c("dense-bf16-hf", "model");
    c.edit_config([](json& j) { j["text_config"]["attention_k_eq_v"] = true; });
    expect_error([&] { load_target(c.dir()); },
                 {"model.language_model.layers.2.self_attn.v_proj", "text_config.attention_k_eq_v is true"});
  }
  {  // a k_eq_v checkpoint read as plain GQA: full k_proj has 1 global head, not num_key_value_heads
    const Copy c("kveq-densehead-random", "model");
    c.edit_config([](json& j) { j["text_config"]["attention_k_eq_v"] = false; });
    expect_error([&] { load_target(c.dir()); },
                 {"self_attn.k_proj.weight", "dim 0 is 64", "text_config.num_key_value_heads (2)",
                  "text_config.global_head_dim (64)", "= 128"});
  }
}

TEST(CheckpointErrors, PleTensorsWithoutPleWidth) {
  const Copy c("e4b-like-bf16-hf", "model");
  c.edit_config([](json& j) { j["text_config"]["hidden_size_per_layer_input"] = 0; });
  expect_error([&] { load_target(c.dir()); }, {"embed_tokens_per_layer", "hidden_size_per_layer_input = 0"});
}

TEST(CheckpointErrors, MoeTensorsWhenMoeDisabled) {
  const Copy c("moe-f32-hf", "model");
  c.edit_config([](json& j) { j["text_config"]["enable_moe_block"] = false; });
  expect_error([&] { load_target(c.dir()); }, {"router.proj", "text_config.enable_moe_block"});
}

TEST(CheckpointErrors, ExtraLayerTensors) {
  const Copy c("dense-bf16-hf", "model");
  c.edit_config([](json& j) {
    j["text_config"]["num_hidden_layers"] = 5;
    j["text_config"]["layer_types"].erase(5);
  });
  expect_error([&] { load_target(c.dir()); }, {"layers.5.input_layernorm.weight", "text_config.num_hidden_layers = 5"});
}

TEST(CheckpointErrors, TextOnlyPrefixAndMissingEmbedding) {
  const Copy c("dense-bf16-hf", "model");
  c.edit_tensors([](std::string& n, std::vector<std::byte>&) {
    n = "model." + n.substr(std::string("model.language_model.").size());
    return true;
  });
  EXPECT_EQ(load_target(c.dir()).prefix, "model.");
  c.drop_tensor("model.embed_tokens.weight");
  expect_error([&] { load_target(c.dir()); }, {"no embed_tokens.weight", c.dir()});
}

TEST(CheckpointErrors, UntiedEmbeddingsNeedLmHead) {
  const Copy c("dense-bf16-hf", "model");
  c.edit_config([](json& j) {
    j["tie_word_embeddings"] = false;
    j["text_config"]["tie_word_embeddings"] = false;
  });
  expect_error([&] { load_target(c.dir()); }, {"tie_word_embeddings", "lm_head"});
}

// ---- broken drafters -----------------------------------------------------------------------------

TEST(CheckpointErrors, DrafterWithWrongBackboneHiddenSize) {
  const Copy c("dense-bf16-hf", "drafter");
  c.edit_config([](json& j) { j["backbone_hidden_size"] = 160; });
  expect_error([&] { load_drafter(c.dir()); },
               {"pre_projection.weight", "dim 1 is 256", "2 × backbone_hidden_size (160)", "320"});
}

TEST(CheckpointErrors, DrafterHeadSelection) {
  {
    const Copy c("dense-densehead-bf16", "drafter");
    c.edit_config([](json& j) { j["use_ordered_embeddings"] = true; });
    expect_error([&] { load_drafter(c.dir()); }, {"use_ordered_embeddings is true", "masked_embedding.centroids"});
  }
  {
    const Copy c("dense-bf16-hf", "drafter");
    c.edit_config([](json& j) { j.erase("use_ordered_embeddings"); });
    EXPECT_TRUE(load_drafter(c.dir()).centroid_head);  // falls back to tensor presence
    c.edit_config([](json& j) { j["use_ordered_embeddings"] = false; });
    const DrafterCheckpoint d = load_drafter(c.dir());
    EXPECT_FALSE(d.centroid_head);  // the flag wins over the tensors
    EXPECT_EQ(d.token_ordering, nullptr);
  }
}

TEST(CheckpointErrors, TokenOrderingMustBeAPermutation) {
  const Copy c("dense-bf16-hf", "drafter");
  c.edit_tensors([](std::string& n, std::vector<std::byte>& b) {
    if (n == "masked_embedding.token_ordering") std::memcpy(b.data() + 8, b.data(), 8);  // entry 1 = entry 0
    return true;
  });
  expect_error([&] { load_drafter(c.dir()); }, {"masked_embedding.token_ordering", "appears twice", "permutation"});
}

TEST(CheckpointErrors, DrafterLayerScalarOnSomeLayersOnly) {
  const Copy c("dense-bf16-hf", "drafter");
  c.drop_tensor("model.layers.2.layer_scalar");
  expect_error([&] { load_drafter(c.dir()); }, {"missing tensor model.layers.2.layer_scalar"});
}

// ---- resolve_module / resolve_vector directly -------------------------------------------------

TEST(CheckpointResolve, DenseAndQuantizedModules) {
  const TensorStore s = TensorStore::open_dir(golden("kveq-q8g64-mlx", "model"));
  const QuantizationConfig q =
      parse_quantization(read_json_file(golden("kveq-q8g64-mlx", "model") + "/config.json"), "c.json");
  const ModuleRef m = resolve_module(s, q, "language_model.model.layers.0.self_attn.q_proj", {128, 128});
  EXPECT_TRUE(m.quantized);
  EXPECT_EQ(m.quant.bits, 8);
  EXPECT_EQ(m.dtype(), DType::BF16);
  EXPECT_EQ(m.nbytes(), 128u * 32 * 4 + 2 * (128u * 2 * 2));
  expect_error(
      [&] {
        resolve_module(s, q, "language_model.model.layers.0.self_attn.q_proj", {96, 128});
      },
      {"q_proj.weight", "dim 0 is 128", "96"});
  expect_error(
      [&] {
        resolve_module(s, q, "language_model.model.layers.0.self_attn.nope", {1, 1});
      },
      {"missing tensor language_model.model.layers.0.self_attn.nope.weight"});
  expect_error(
      [&] {
        resolve_module(s, QuantizationConfig{}, "language_model.model.layers.0.self_attn.q_proj", {128, 128});
      },
      {"no 'quantization' block"});
  EXPECT_EQ(resolve_vector(s, "language_model.model.norm.weight", 128).shape[0], 128);
  expect_error([&] { resolve_vector(s, "language_model.model.norm.weight", 64); }, {"norm.weight", "64"});
  expect_error([&] { resolve_vector(s, "language_model.model.embed_tokens.weight", 512); },
               {"embed_tokens.weight", "U32"});
}

}  // namespace
}  // namespace specula

namespace specula {
namespace {

// ---- checkpoint paths and files beside the weights ----------------------------------------------

TEST(CheckpointPaths, SingleSafetensorsFileWithItsConfigBeside) {
  const Copy c("dense-bf16-hf", "model");
  const std::string renamed = c.dir() + "/gemma-tiny.safetensors";
  fs::rename(c.dir() + "/model.safetensors", renamed);
  EXPECT_EQ(model_files_dir(renamed), c.dir());
  EXPECT_EQ(model_files_dir(c.dir()), c.dir());
  EXPECT_TRUE(is_weight_file_path(renamed));
  EXPECT_FALSE(is_weight_file_path(c.dir()));
  const TargetCheckpoint ck = load_target(renamed);
  EXPECT_EQ(ck.dir, c.dir());
  EXPECT_EQ(*ck.embed_tokens.weight->file, renamed);
  EXPECT_EQ(ck.layers.size(), load_target(golden("dense-bf16-hf", "model")).layers.size());
  // The directory itself no longer has a model shard: the sidecar-like name is not opened.
  expect_error([&] { load_target(c.dir()); }, {"no safetensors files in " + c.dir(), "gemma-tiny.safetensors"});
  // A file without a config beside it names the config it looked for.
  fs::remove(c.config_path());
  expect_error([&] { load_target(renamed); }, {c.config_path()});
}

TEST(CheckpointPaths, KvConfigIsReportedAsIgnored) {
  const Copy c("dense-bf16-hf", "model");
  testing::internal::CaptureStderr();
  load_target(c.dir());
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  std::ofstream(c.dir() + "/kv_config.json") << R"([{"layer_idx": 2, "bits": 8, "group_size": 64}])";
  testing::internal::CaptureStderr();
  load_target(c.dir());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(c.dir() + "/kv_config.json"), std::string::npos) << err;
  EXPECT_NE(err.find("is ignored"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(CheckpointTowers, TowerTensorsAreNamedAndIgnoredByTheTextLoader) {
  EXPECT_EQ(tower_of("model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight"), "vision");
  EXPECT_EQ(tower_of("vision_tower.patch_embedder.position_embedding_table"), "vision");
  EXPECT_EQ(tower_of("model.embed_vision.embedding_projection.weight"), "vision");
  EXPECT_EQ(tower_of("model.audio_tower.layers.3.lconv1d.depthwise_conv1d.weight"), "audio");
  EXPECT_EQ(tower_of("embed_audio.embedding_projection.weight"), "audio");
  EXPECT_EQ(tower_of("model.language_model.embed_tokens.weight"), "");
  EXPECT_EQ(tower_of("model.embed_tokens.weight"), "");
  EXPECT_EQ(tower_of("language_model.model.layers.0.self_attn.q_proj.weight"), "");

  // A golden target with a vision tensor added loads to the same modules.
  const Copy c("dense-bf16-hf", "model");
  const TargetCheckpoint plain = load_target(c.dir());
  const size_t text_tensors = plain.store.size();
  c.edit_tensors([](std::string&, std::vector<std::byte>&) { return true; });
  {
    const std::string path = c.dir() + "/model.safetensors";
    std::vector<TensorSpec> specs;
    {
      const SafetensorsFile f = SafetensorsFile::open(path);
      for (const TensorView& t : f.tensors())
        specs.push_back(tensor_from_bytes(t.name, t.dtype, t.shape, std::vector<std::byte>(t.data, t.data + t.nbytes)));
    }
    specs.push_back(tensor_from_bytes("model.vision_tower.std_bias", DType::F32, {4}, std::vector<std::byte>(16)));
    write_safetensors(path, specs);
  }
  const TargetCheckpoint with_tower = load_target(c.dir());
  EXPECT_EQ(with_tower.store.size(), text_tensors + 1);
  EXPECT_EQ(with_tower.layers.size(), plain.layers.size());
  EXPECT_EQ(with_tower.prefix, plain.prefix);
}

}  // namespace
}  // namespace specula
