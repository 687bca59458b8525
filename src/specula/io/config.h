#pragma once
// Parsed and validated configuration of target models, drafters and generation defaults
// (docs/gemma4.md §2, §7). Parsing never guesses silently: a missing key is either inferred from
// tensor shapes by the checkpoint loader (checkpoint.h) or reported as an error naming the key and
// file.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace specula {

// ---- quantization (docs/gemma4.md §4) ---------------------------------------------------------

struct QuantSpec {
  int bits = 4;         // 2, 3, 4, 5, 6, 8
  int group_size = 64;  // 32, 64, 128
  std::string mode = "affine";
  // specula's own key, written into converted GGUF images: the scales and biases of each run of
  // this many inputs are one f32 factor times int8 multipliers (kernels/shared_scales.h), so the
  // fast kernels' layout stores them compactly. 0: no such promise.
  int superblock = 0;
  // specula's own key, written into converted GGUF images: every code fits in this many bits,
  // fewer than `bits` stores them in (GGUF Q6_K's 6-bit codes kept as 8-bit), so the fast kernels'
  // layout may hold them narrower. 0: no such promise.
  int code_bits = 0;
  bool operator==(const QuantSpec&) const = default;
};

struct QuantizationConfig {
  bool present = false;   // the config had a `quantization` / `quantization_config` block
  std::string block_key;  // which of the two keys it came from (for messages)
  QuantSpec defaults;
  // Per-module overrides keyed by module path (tensor name minus .weight/.scales/.biases);
  // nullopt = the `false` entry ("not quantized").
  std::map<std::string, std::optional<QuantSpec>> overrides;

  // The spec for a module that has a `.scales` tensor: the override if any (missing fields
  // inherit the defaults), else the defaults. Throws if the override says `false`.
  QuantSpec spec_for(const std::string& module_path) const;
};

// Parses the block found in `raw` (`quantization` first, else `quantization_config`); absent
// block -> present = false. Rejects non-affine modes and non-MLX (`quant_method`) formats.
QuantizationConfig parse_quantization(const nlohmann::json& raw, const std::string& source);

// ---- text model (target trunk, and the drafter's text_config) --------------------------------

enum class LayerType { Sliding, Full };
const char* layer_type_name(LayerType t);  // "sliding_attention" / "full_attention"

struct RopeParams {
  std::string type = "default";  // "default" | "linear" | "proportional"
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;
  double factor = 1.0;
};

struct TextConfig {
  std::string model_type;  // gemma4_text / gemma4_unified_text
  int64_t hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  std::optional<int> num_global_key_value_heads;
  int head_dim = 0;
  int global_head_dim = 0;
  bool attention_k_eq_v = false;
  int64_t intermediate_size = 0;
  bool use_double_wide_mlp = false;
  double rms_norm_eps = 1e-6;
  int64_t vocab_size = 0;
  int sliding_window = 0;
  std::vector<LayerType> layer_types;
  RopeParams rope_sliding;
  RopeParams rope_full;
  std::optional<double> final_logit_softcapping;
  int64_t hidden_size_per_layer_input = 0;  // PLE width (0 = no per-layer inputs)
  int64_t vocab_size_per_layer_input = 0;
  int num_kv_shared_layers = 0;
  bool enable_moe_block = false;
  int num_experts = 0;
  int top_k_experts = 0;
  int64_t moe_intermediate_size = 0;
  bool tie_word_embeddings = true;
  int64_t max_position_embeddings = 131072;
  std::string hidden_activation = "gelu_pytorch_tanh";
  // Keys absent from the file whose defaults differ across reference stacks (docs/gemma4.md §2.2).
  // Their values above are placeholders: the checkpoint loader infers each from tensor shapes and
  // removes it from this list (after load_target/load_drafter it is empty).
  std::vector<std::string> keys_to_infer;
  bool needs_inference(const std::string& key) const;
};

// Per-layer derived geometry (docs/gemma4.md §2.4).
struct LayerGeometry {
  int index = 0;
  LayerType type = LayerType::Sliding;
  int head_dim = 0;       // D_i
  int num_kv_heads = 0;   // nKV_i
  bool k_eq_v = false;    // V derives from the raw k_proj output
  bool kv_donor = true;   // owns a KV cache (i < first_shared)
  int kv_source = 0;      // layer whose cache this layer reads (itself for donors)
  int64_t mlp_width = 0;  // from config; the loader checks it against the tensor shape
  RopeParams rope;
};

// Derives per-layer geometry; throws if a sharer's type has no donor, or values are inconsistent.
std::vector<LayerGeometry> derive_geometry(const TextConfig& text, const std::string& source);

// ---- target ---------------------------------------------------------------------------------

struct TargetConfig {
  std::string source;      // path of config.json, for messages
  std::string model_type;  // top-level: gemma4, gemma4_unified, gemma4_text, ...
  std::vector<std::string> architectures;
  TextConfig text;
  QuantizationConfig quantization;
  int bos_token_id = 2;
  int pad_token_id = 0;
  std::vector<int> eos_token_ids;
  std::vector<LayerGeometry> layers;
  int first_shared_layer = 0;   // NL - num_kv_shared_layers
  int last_sliding_donor = -1;  // drafter donor pair (docs/gemma4.md §2.4); -1 if none
  int last_full_donor = -1;
};

// raw = parsed config.json. Nested `text_config` or flat gemma4_text (docs/gemma4.md §2.1).
TargetConfig parse_target_config(const nlohmann::json& raw, const std::string& source);

// Recomputes `layers`, `first_shared_layer` and the donor pair from `cfg.text` (the loader calls
// it after inferring absent keys from tensor shapes).
void update_target_geometry(TargetConfig& cfg);

// ---- drafter (docs/gemma4.md §7) -------------------------------------------------------------

struct DrafterConfig {
  std::string source;
  std::string model_type;  // gemma4_assistant / gemma4_unified_assistant
  int64_t backbone_hidden_size = 0;
  std::optional<bool> use_ordered_embeddings;  // absent -> decided by tensor presence
  int num_centroids = 0;
  int centroid_intermediate_top_k = 0;
  bool tie_word_embeddings = true;
  TextConfig text;
  QuantizationConfig quantization;
  std::vector<int> eos_token_ids;
  std::vector<LayerGeometry> layers;  // all layers are Q-only (kv_donor = false, kv_source = -1:
                                      // K/V come from the target's last donor of the same type)
};

DrafterConfig parse_drafter_config(const nlohmann::json& raw, const std::string& source);

// ---- generation_config.json (docs/gemma4.md §2.5) ----------------------------------------------

struct GenerationConfig {
  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;
  std::optional<int> pad_token_id;
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::vector<int> suppress_tokens;
  std::optional<int> num_assistant_tokens;  // drafter generation_config
};

GenerationConfig parse_generation_config(const nlohmann::json& raw, const std::string& source);

// Reads and parses a JSON file; throws naming the file (and line/column) on I/O or syntax errors.
nlohmann::json read_json_file(const std::string& path);

}  // namespace specula
