#pragma once
// A checkpoint directory resolved into validated modules: configs + tensors, with every tensor the
// config implies present and shaped as the config says (docs/gemma4.md §3), checked at load so
// nothing fails mid-generation. Both tensor prefixes are accepted (docs/gemma4.md §3.1).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "specula/io/config.h"
#include "specula/io/safetensors.h"

namespace specula {

// One weight (linear, embedding table or expert stack) resolved from its tensors.
// Dense: `weight` has dtype BF16/F16/F32 and the logical shape.
// Affine-quantized: `weight` is U32 [..., in*bits/32], `scales`/`biases` [..., in/group_size].
struct ModuleRef {
  std::string path;            // module path, e.g. "model.layers.0.self_attn.q_proj"
  std::vector<int64_t> shape;  // logical shape: [out, in] or [experts, out, in]
  bool quantized = false;
  QuantSpec quant;  // valid when quantized
  const TensorView* weight = nullptr;
  const TensorView* scales = nullptr;  // quantized only
  const TensorView* biases = nullptr;  // quantized only
  DType dtype() const;                 // weight dtype (dense) or scales dtype (quantized)
  uint64_t nbytes() const;             // bytes of weight + scales + biases
};

// Resolves `<path>.weight` (+ `.scales`/`.biases`) and checks it against the expected logical
// shape and the quantization config. Throws naming the tensor, the key and both values.
ModuleRef resolve_module(const TensorStore& store, const QuantizationConfig& quant, const std::string& path,
                         const std::vector<int64_t>& expected_shape);

// A 1-D (or [1]) vector tensor such as a norm weight; checks length and float dtype.
const TensorView& resolve_vector(const TensorStore& store, const std::string& name, int64_t length);

struct TargetLayerModules {
  ModuleRef q_proj, o_proj;
  std::optional<ModuleRef> k_proj, v_proj;  // donors only; v absent for k_eq_v layers
  const TensorView* q_norm = nullptr;
  const TensorView* k_norm = nullptr;  // donors only
  const TensorView* input_layernorm = nullptr;
  const TensorView* post_attention_layernorm = nullptr;
  const TensorView* pre_feedforward_layernorm = nullptr;
  const TensorView* post_feedforward_layernorm = nullptr;
  const TensorView* layer_scalar = nullptr;  // nullptr -> 1.0 (docs/gemma4.md §3.2)
  ModuleRef gate_proj, up_proj, down_proj;   // dense MLP (the dense branch on MoE layers)
  // Per-layer inputs (PLE models)
  std::optional<ModuleRef> per_layer_input_gate, per_layer_projection;
  const TensorView* post_per_layer_input_norm = nullptr;
  // MoE
  std::optional<ModuleRef> router_proj;
  const TensorView* router_scale = nullptr;
  const TensorView* router_per_expert_scale = nullptr;
  // Experts: MLX split form (switch_glu.gate_proj / up_proj) or HF fused gate_up_proj, whose
  // rows [0, I) are gate and [I, 2I) up along dim -2.
  std::optional<ModuleRef> experts_gate, experts_up, experts_gate_up, experts_down;
  const TensorView* pre_feedforward_layernorm_2 = nullptr;
  const TensorView* post_feedforward_layernorm_1 = nullptr;
  const TensorView* post_feedforward_layernorm_2 = nullptr;
};

// How a GGUF checkpoint's tensors were laid out at load (model/gguf_image_cache.h).
enum class GgufImageSource {
  None,          // not a GGUF checkpoint
  Memory,        // converted into memory (no cache directory, or the cache could not be used)
  CacheHit,      // mapped from a matching cached image
  CacheWritten,  // converted into the cache, then mapped from it
  Described,     // not converted: the tensors' names, formats and sizes without their data
                 // (GgufLoadOptions::convert, for `inspect`)
};

struct TargetCheckpoint {
  std::string dir;
  GgufImageSource gguf_image = GgufImageSource::None;
  TargetConfig config;
  std::optional<GenerationConfig> generation;  // generation_config.json if present
  TensorStore store;
  std::string prefix;                // "language_model.model." / "model." / "model.language_model."
  ModuleRef embed_tokens;            // [V, H], also the tied LM head
  std::optional<ModuleRef> lm_head;  // only if tie_word_embeddings is false
  const TensorView* final_norm = nullptr;
  // PLE
  std::optional<ModuleRef> embed_tokens_per_layer;      // [V_ple, NL*W]
  std::optional<ModuleRef> per_layer_model_projection;  // [NL*W, H]
  const TensorView* per_layer_projection_norm = nullptr;
  std::vector<TargetLayerModules> layers;
};

// Loads config.json (+ generation_config.json), opens the tensors and validates everything.
TargetCheckpoint load_target(const std::string& dir);

struct DrafterLayerModules {
  ModuleRef q_proj, o_proj, gate_proj, up_proj, down_proj;
  const TensorView* q_norm = nullptr;
  const TensorView* input_layernorm = nullptr;
  const TensorView* post_attention_layernorm = nullptr;
  const TensorView* pre_feedforward_layernorm = nullptr;
  const TensorView* post_feedforward_layernorm = nullptr;
  const TensorView* layer_scalar = nullptr;
};

struct DrafterCheckpoint {
  std::string dir;
  GgufImageSource gguf_image = GgufImageSource::None;
  DrafterConfig config;
  std::optional<GenerationConfig> generation;
  TensorStore store;
  ModuleRef pre_projection;   // [h, 2*H_b]
  ModuleRef post_projection;  // [H_b, h]
  ModuleRef embed_tokens;     // [V, h] (drafter's own table, used by its LM head)
  std::optional<ModuleRef> lm_head;
  const TensorView* final_norm = nullptr;
  bool centroid_head = false;                  // resolved head choice (docs/gemma4.md §7)
  std::optional<ModuleRef> centroids;          // [C, h]
  const TensorView* token_ordering = nullptr;  // [V] int64 (or int32)
  std::vector<DrafterLayerModules> layers;
};

DrafterCheckpoint load_drafter(const std::string& dir);

// The same validation over an already-parsed config.json and an already-built tensor store, e.g.
// the data-less TensorStore::from_views inventory of a synthetic full-size plan, so such an
// inventory is checked without writing gigabytes. No generation_config.json is read;
// `config_source` names the config in messages.
TargetCheckpoint load_target(const nlohmann::json& config, const std::string& config_source, TensorStore store);
DrafterCheckpoint load_drafter(const nlohmann::json& config, const std::string& config_source, TensorStore store);

// Drafter/target compatibility (docs/gemma4.md §7); returns human-readable problems
// (empty = compatible).
std::vector<std::string> check_drafter_compat(const TargetConfig& target, const DrafterConfig& drafter);

}  // namespace specula
