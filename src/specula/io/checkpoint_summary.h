#pragma once
// What a loaded checkpoint is, in numbers a user (or a benchmark) needs: architecture and variant
// flags, per-layer-type geometry, the KV-sharing map, how each kind of module is stored, parameter
// count, bytes on disk, weight bytes streamed per decoded token, and the KV-cache footprint; plus
// the drafter's summary and its compatibility with the target. Rendered as text or JSON
// (`specula inspect`). A GGUF checkpoint is summarized through the safetensors image it loads as
// (docs/gguf.md §4): its storage groups, tensor bytes and bytes_per_token are the image's, its
// bytes on disk the .gguf file's.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/io/checkpoint.h"

namespace specula {

struct LayerTypeSummary {
  LayerType type = LayerType::Sliding;
  int count = 0;   // layers of this type
  int donors = 0;  // of which own a KV cache
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  bool k_eq_v = false;
  RopeParams rope;
  std::vector<int64_t> mlp_widths;  // distinct dense-MLP widths, ascending
};

// How one kind of module is stored, e.g. all `self_attn.q_proj` as 4-bit group-64.
struct StorageGroup {
  std::string kind;         // module path without prefix and `layers.N.`; "1-d vectors" for norms etc.
  std::string format;       // "bf16", "f32", "f16", "i64", or "q<bits>g<group>"
  int count = 0;            // modules (or vectors) in this group
  uint64_t parameters = 0;  // logical elements
  uint64_t bytes = 0;       // stored bytes (weight + scales + biases)
};

struct DrafterSummary {
  std::string dir;
  std::string model_type;
  int64_t backbone_hidden_size = 0;
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  int global_head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  bool centroid_head = false;
  int num_centroids = 0;
  int centroid_top_k = 0;
  std::vector<StorageGroup> storage;
  uint64_t parameters = 0;
  uint64_t tensor_bytes = 0;
  uint64_t bytes_on_disk = 0;  // the safetensors files, or the .gguf file
  // Weight bytes read by one draft step: trunk + projections + the head (centroid head: the
  // centroid table and top_k clusters' rows of the embedding; dense head: the whole table).
  uint64_t bytes_per_step = 0;
  std::vector<std::string> compat_problems;  // check_drafter_compat; empty = compatible
};

struct CheckpointSummary {
  std::string dir;
  std::string model_type;  // top-level config model_type
  std::string text_model_type;
  std::vector<std::string> architectures;
  std::string prefix;  // tensor prefix
  bool per_layer_inputs = false;
  bool kv_sharing = false;
  bool k_eq_v = false;
  bool moe = false;
  int64_t hidden_size = 0;
  int num_layers = 0;
  int64_t vocab_size = 0;
  int sliding_window = 0;
  int64_t per_layer_input_width = 0;
  int num_experts = 0;
  int top_k_experts = 0;
  int64_t moe_intermediate_size = 0;
  std::vector<LayerTypeSummary> layer_types;  // sliding first, then full (types present only)
  int first_shared_layer = 0;
  int last_sliding_donor = -1;
  int last_full_donor = -1;
  std::vector<int> kv_source;  // per layer: the layer whose cache it reads

  std::vector<StorageGroup> storage;  // the text model's tensors (towers are in `towers`)
  // Logical elements of every weight tensor in the checkpoint (quantized ones counted unpacked;
  // scales/biases and integer index tensors not counted), including unused ones that a file may
  // carry (HF originals keep K/V projections on KV-shared layers) and the multimodal towers.
  uint64_t parameters = 0;
  uint64_t text_parameters = 0;   // of which the text model's
  uint64_t tower_parameters = 0;  // of which the vision / audio towers' (never read by generation)
  // The towers' tensors, one group per tower and format: kind "vision" / "audio".
  std::vector<StorageGroup> towers;
  uint64_t tower_bytes = 0;    // their data sizes
  uint64_t tensor_bytes = 0;   // sum of the tensors' data sizes (towers included)
  uint64_t bytes_on_disk = 0;  // the safetensors files, headers included; or the .gguf file
  // GGUF checkpoints: how the image was had (described: not converted, only its size is known),
  // its size, and its file when it is the image cache's (model/gguf_image_cache.h).
  GgufImageSource gguf_image = GgufImageSource::None;
  uint64_t gguf_image_bytes = 0;
  std::string gguf_image_file;
  // Weight bytes read to decode one token, every tensor as stored (what exact precision reads):
  // every linear the forward uses (the tied embedding once, as LM head), one gathered row of the
  // per-layer-input table, top_k of num_experts experts per MoE layer, and the 1-d vectors.
  uint64_t bytes_per_token = 0;
  // The same in fast precision (the default), whose kernels read quantized matrices in their
  // packed layout (kernels/packed_affine.h; smaller than the image for GGUF K-quants). The
  // kernels' layer computes it (TargetWeights::decode_bytes_per_token), so the caller sets it,
  // with the kernel set it holds for ("avx512", "avx2", "scalar"); 0 when not set.
  uint64_t fast_bytes_per_token = 0;
  std::string fast_kernels;
  // f32 KV cache (K and V) of the cache-owning layers: full-attention layers grow per token;
  // sliding layers grow per token until `sliding_window` positions, then stay at the fixed total.
  uint64_t kv_bytes_per_token_full = 0;
  uint64_t kv_bytes_per_token_sliding = 0;
  uint64_t kv_bytes_sliding_total = 0;
  std::optional<DrafterSummary> drafter;

  uint64_t kv_bytes_at(int64_t context) const;  // total KV bytes for `context` cached positions
  // What a decode step reads in the default precision: fast_bytes_per_token when set.
  uint64_t decode_bytes_per_token() const { return fast_bytes_per_token > 0 ? fast_bytes_per_token : bytes_per_token; }
};

CheckpointSummary summarize_checkpoint(const TargetCheckpoint& target, const DrafterCheckpoint* drafter = nullptr);
DrafterSummary summarize_drafter(const DrafterCheckpoint& drafter, const TargetConfig* target = nullptr);

std::string format_summary(const CheckpointSummary& summary);  // human-readable, ends with '\n'
nlohmann::json summary_json(const CheckpointSummary& summary);

}  // namespace specula
