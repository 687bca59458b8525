#include "specula/synth/presets.h"

#include <fmt/format.h>

#include "specula/util/error.h"

namespace specula::synth {

namespace {

// [S x sliding_per_block, F] repeated `blocks` times: the Gemma 4 layer pattern.
std::vector<LayerType> layer_pattern(int sliding_per_block, int blocks) {
  std::vector<LayerType> types;
  for (int b = 0; b < blocks; ++b) {
    for (int s = 0; s < sliding_per_block; ++s) types.push_back(LayerType::Sliding);
    types.push_back(LayerType::Full);
  }
  return types;
}

// Values shared by every Gemma 4 text config (docs/gemma4.md §1).
TextConfig base_text(int64_t hidden, std::vector<LayerType> types, int heads, int kv_heads, int head_dim,
                     int global_head_dim, int64_t intermediate, int window, int64_t vocab) {
  TextConfig t;
  t.model_type = "gemma4_text";
  t.hidden_size = hidden;
  t.num_hidden_layers = static_cast<int>(types.size());
  t.layer_types = std::move(types);
  t.num_attention_heads = heads;
  t.num_key_value_heads = kv_heads;
  t.head_dim = head_dim;
  t.global_head_dim = global_head_dim;
  t.intermediate_size = intermediate;
  t.sliding_window = window;
  t.vocab_size = vocab;
  t.rms_norm_eps = 1e-6;
  t.rope_sliding = RopeParams{"default", 10000.0, 1.0, 1.0};
  t.rope_full = RopeParams{"proportional", 1000000.0, 0.25, 1.0};
  t.final_logit_softcapping = 30.0;
  t.tie_word_embeddings = true;
  t.max_position_embeddings = 131072;
  t.hidden_activation = "gelu_pytorch_tanh";
  return t;
}

DrafterPreset centroid_drafter(int64_t hidden, int heads, int64_t intermediate, int centroids, int top_k) {
  return DrafterPreset{"gemma4_assistant", hidden, heads, intermediate, true, centroids, top_k};
}

DrafterPreset dense_drafter(std::string model_type, int64_t hidden, int heads, int64_t intermediate,
                            int declared_centroids, int declared_top_k) {
  return DrafterPreset{std::move(model_type), hidden, heads, intermediate, false, declared_centroids, declared_top_k};
}

// The towers of the released checkpoints (their config.json vision_config / audio_config).
VisionTowerPreset small_vision() { return {768, 16, 12, 64, 3072, 16, 10240, false, true}; }   // E2B, E4B
VisionTowerPreset large_vision() { return {1152, 27, 16, 72, 4304, 16, 10240, true, false}; }  // 26B-A4B, 31B
AudioTowerPreset conformer_audio() { return {1024, 12, 8, {128, 32}, 128, 5, 1536}; }          // E2B, E4B

// Test-sized towers with the real tensor names. The position table (2 x 16384 x 64 bf16, 4 MiB)
// has its middle 2 MiB from its neighbours, beyond even a huge-page-sized page-cache folio mapped
// whole around one of their pages, so tests can see that loading never touches it.
VisionTowerPreset tiny_vision(bool standardize, bool clipped) {
  return {64, 2, 2, 32, 128, 4, 16384, standardize, clipped};
}
AudioTowerPreset tiny_audio() { return {32, 2, 2, {8, 4}, 16, 5, 48}; }

std::vector<Preset> make_presets() {
  std::vector<Preset> all;
  const std::string wrapper = "gemma4";
  const std::string arch = "Gemma4ForConditionalGeneration";

  {  // Plain dense stack: sliding + full layers, no variants.
    Preset p{"tiny-dense",
             "dense, 6 layers, hidden 64",
             true,
             wrapper,
             arch,
             base_text(64, layer_pattern(2, 2), 4, 2, 32, 64, 128, 16, 512),
             {},
             {},
             {}};
    p.drafter = centroid_drafter(64, 4, 128, 32, 4);
    p.vision = tiny_vision(false, true);
    all.push_back(std::move(p));
  }
  {  // E4B-like: per-layer inputs, the last 4 layers share KV (double-wide MLP there).
    Preset p{"tiny-e4b", "per-layer inputs + KV sharing + double-wide MLP, 8 layers, hidden 128", true, wrapper,
             arch,       base_text(128, layer_pattern(3, 2), 4, 2, 32, 64, 128, 16, 512),         {},   {},
             {}};
    p.text.hidden_size_per_layer_input = 64;
    p.text.vocab_size_per_layer_input = 512;
    p.text.num_kv_shared_layers = 4;
    p.text.use_double_wide_mlp = true;
    p.drafter = centroid_drafter(64, 4, 128, 32, 4);
    p.vision = tiny_vision(false, true);
    p.audio = tiny_audio();
    all.push_back(std::move(p));
  }
  {  // 12B/31B-like: full layers have K == V and a single global KV head.
    Preset p{"tiny-kveq", "attention_k_eq_v full layers, 1 global KV head, 6 layers, hidden 128", true, wrapper,
             arch,        base_text(128, layer_pattern(2, 2), 4, 2, 32, 64, 256, 16, 512),        {},   {},
             {}};
    p.text.attention_k_eq_v = true;
    p.text.num_global_key_value_heads = 1;
    p.drafter = dense_drafter("gemma4_assistant", 64, 4, 128, 32, 4);
    p.vision = tiny_vision(true, false);
    all.push_back(std::move(p));
  }
  {  // 26B-A4B-like: MoE block next to the dense MLP, k_eq_v full layers.
    Preset p{"tiny-moe", "MoE (8 experts, top 2) + attention_k_eq_v, 4 layers, hidden 128", true, wrapper,
             arch,       base_text(128, layer_pattern(1, 2), 4, 2, 32, 64, 128, 16, 512),   {},   {},
             {}};
    p.text.attention_k_eq_v = true;
    p.text.num_global_key_value_heads = 1;
    p.text.enable_moe_block = true;
    p.text.num_experts = 8;
    p.text.top_k_experts = 2;
    p.text.moe_intermediate_size = 64;
    p.drafter = dense_drafter("gemma4_assistant", 64, 4, 128, 32, 4);
    p.vision = tiny_vision(true, false);
    all.push_back(std::move(p));
  }

  const int64_t V = 262144;
  {
    Preset p{"e2b", "Gemma 4 E2B geometry",
             false, wrapper,
             arch,  base_text(1536, layer_pattern(4, 7), 8, 1, 256, 512, 6144, 512, V),
             {},    {},
             {}};
    p.text.hidden_size_per_layer_input = 256;
    p.text.vocab_size_per_layer_input = V;
    p.text.num_kv_shared_layers = 20;
    p.text.use_double_wide_mlp = true;
    p.drafter = centroid_drafter(256, 4, 2048, 2048, 32);
    p.vision = small_vision();
    p.audio = conformer_audio();
    all.push_back(std::move(p));
  }
  {
    Preset p{"e4b", "Gemma 4 E4B geometry",
             false, wrapper,
             arch,  base_text(2560, layer_pattern(5, 7), 8, 2, 256, 512, 10240, 512, V),
             {},    {},
             {}};
    p.text.hidden_size_per_layer_input = 256;
    p.text.vocab_size_per_layer_input = V;
    p.text.num_kv_shared_layers = 18;
    p.text.use_double_wide_mlp = false;
    p.drafter = centroid_drafter(256, 4, 2048, 2048, 32);
    p.vision = small_vision();
    p.audio = conformer_audio();
    all.push_back(std::move(p));
  }
  // The larger drafters' trunk widths are not published; hidden 1024 / 16 heads is mlx-bun's 12B
  // reading, and intermediate 8192 reproduces the ~840 MB bf16 sizes of the 12B/26B drafters.
  {
    Preset p{"12b",
             "Gemma 4 12B (unified) geometry",
             false,
             "gemma4_unified",
             "Gemma4UnifiedForConditionalGeneration",
             base_text(3840, layer_pattern(5, 8), 16, 8, 256, 512, 15360, 1024, V),
             {},
             {},
             {}};
    p.text.model_type = "gemma4_unified_text";
    p.text.attention_k_eq_v = true;
    p.text.num_global_key_value_heads = 1;
    p.text.max_position_embeddings = 262144;
    p.drafter = dense_drafter("gemma4_unified_assistant", 1024, 16, 8192, 2048, 32);
    all.push_back(std::move(p));
  }
  {
    Preset p{"26b-a4b", "Gemma 4 26B-A4B (MoE) geometry",
             false,     wrapper,
             arch,      base_text(2816, layer_pattern(5, 5), 16, 8, 256, 512, 2112, 1024, V),
             {},        {},
             {}};
    p.text.attention_k_eq_v = true;
    p.text.num_global_key_value_heads = 2;
    p.text.enable_moe_block = true;
    p.text.num_experts = 128;
    p.text.top_k_experts = 8;
    p.text.moe_intermediate_size = 704;
    p.text.max_position_embeddings = 262144;
    p.drafter = dense_drafter("gemma4_assistant", 1024, 16, 8192, 2048, 32);
    p.vision = large_vision();
    all.push_back(std::move(p));
  }
  {
    Preset p{"31b", "Gemma 4 31B (dense) geometry",
             false, wrapper,
             arch,  base_text(5376, layer_pattern(5, 10), 32, 16, 256, 512, 21504, 1024, V),
             {},    {},
             {}};
    p.text.attention_k_eq_v = true;
    p.text.num_global_key_value_heads = 4;
    p.text.max_position_embeddings = 262144;
    p.drafter = dense_drafter("gemma4_assistant", 1024, 32, 8192, 2048, 32);
    p.vision = large_vision();
    all.push_back(std::move(p));
  }
  return all;
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = make_presets();
  return all;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.name);
  return names;
}

const Preset& find_preset(const std::string& name) {
  for (const auto& p : presets()) {
    if (p.name == name) return p;
  }
  fail("unknown synth preset '{}' (valid presets: {})", name, fmt::join(preset_names(), ", "));
}

}  // namespace specula::synth
