#pragma once
// Model geometries that `synth` can produce: small ones for fast tests, covering every variant of
// the family (per-layer inputs + KV sharing + double-wide MLP, attention_k_eq_v, MoE), and the real
// geometries of the released checkpoints (docs/gemma4.md §1) for benchmarks and inventory checks.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "specula/io/config.h"

namespace specula::synth {

// The matching "-assistant" drafter (docs/gemma4.md §1). Head dims, KV head counts, window and RoPE
// come from the target, so only the trunk width and the head kind are per preset.
struct DrafterPreset {
  std::string model_type;  // gemma4_assistant / gemma4_unified_assistant
  int64_t hidden_size = 0;
  int num_attention_heads = 0;
  int64_t intermediate_size = 0;
  bool centroid_head = false;  // use_ordered_embeddings + masked_embedding.* tensors
  int num_centroids = 0;       // declared in the config even by dense-head drafters
  int centroid_top_k = 0;
};

// The vision encoder of the multimodal checkpoints (docs/gemma4.md §3.4): a ViT over 16x16 patches
// whose linears are wrapped as `<name>.linear` (plus clip-range scalars on E2B/E4B).
struct VisionTowerPreset {
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  int64_t intermediate_size = 0;
  int patch_size = 16;
  int64_t position_embedding_size = 10240;
  bool standardize = false;      // std_bias / std_scale tensors
  bool clipped_linears = false;  // input_min/input_max/output_min/output_max per linear
};

// The conformer audio encoder of E2B/E4B (docs/gemma4.md §3.4).
struct AudioTowerPreset {
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int64_t conv_channels[2] = {0, 0};  // subsampling_conv_channels
  int64_t feature_size = 128;         // mel bins into the subsampler
  int conv_kernel_size = 5;
  int64_t output_proj_dims = 0;
};

struct Preset {
  std::string name;
  std::string description;
  bool tiny = false;         // a test-sized model (default vocab 512)
  std::string model_type;    // top-level config model_type: gemma4 / gemma4_unified
  std::string architecture;  // architectures[0]
  TextConfig text;           // the text_config values
  DrafterPreset drafter;
  std::optional<VisionTowerPreset> vision;  // `synth --with-towers`
  std::optional<AudioTowerPreset> audio;
};

// All presets, tiny ones first.
const std::vector<Preset>& presets();
std::vector<std::string> preset_names();
// Throws specula::Error naming the unknown preset and listing the valid names.
const Preset& find_preset(const std::string& name);

}  // namespace specula::synth
