#pragma once
// Model geometries that `synth` can produce: small ones for fast tests, covering every variant of
// the family (per-layer inputs + KV sharing + double-wide MLP, attention_k_eq_v, MoE), and the real
// geometries of the released checkpoints (docs/gemma4.md §1) for benchmarks and inventory checks.
#include <cstdint>
#include <string>
#include <vector>

#include "specula/io/config.h"

namespace specula::synth {

// The matching "-assistant" drafter (docs/gemma4.md §1). Head dims, KV head counts, window and RoPE
// come from the target, so only the trunk width and the head kind are per preset.
struct DrafterPreset {
  std::string model_type;          // gemma4_assistant / gemma4_unified_assistant
  int64_t hidden_size = 0;
  int num_attention_heads = 0;
  int64_t intermediate_size = 0;
  bool centroid_head = false;      // use_ordered_embeddings + masked_embedding.* tensors
  int num_centroids = 0;           // declared in the config even by dense-head drafters
  int centroid_top_k = 0;
};

struct Preset {
  std::string name;
  std::string description;
  bool tiny = false;               // a test-sized model (default vocab 512)
  std::string model_type;          // top-level config model_type: gemma4 / gemma4_unified
  std::string architecture;        // architectures[0]
  TextConfig text;                 // the text_config values
  DrafterPreset drafter;
};

// All presets, tiny ones first.
const std::vector<Preset>& presets();
std::vector<std::string> preset_names();
// Throws specula::Error naming the unknown preset and listing the valid names.
const Preset& find_preset(const std::string& name);

}  // namespace specula::synth
