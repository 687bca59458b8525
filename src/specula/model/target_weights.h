#pragma once
// The target checkpoint's tensors as the forward pass uses them: matrices are views of the mapped
// (dense or affine-quantized) weights, never copies; the small vectors (norm weights, scalars,
// router scales) are widened to f32 once at load.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "specula/io/checkpoint.h"
#include "specula/io/checkpoint_summary.h"
#include "specula/kernels/rope.h"
#include "specula/kernels/weight_matrix.h"

namespace specula {

struct TargetLayerWeights {
  LayerGeometry geometry;
  RopeFrequencies rope;

  // Attention
  WeightMatrix q_proj, o_proj;
  std::optional<WeightMatrix> k_proj, v_proj;  // donors; v absent on k_eq_v layers
  std::vector<float> q_norm, k_norm;           // k_norm: donors only
  std::vector<float> input_layernorm, post_attention_layernorm;

  // Dense feed-forward (the dense branch on MoE layers)
  std::vector<float> pre_feedforward_layernorm, post_feedforward_layernorm;
  WeightMatrix gate_proj, up_proj, down_proj;

  // MoE
  bool moe = false;
  WeightMatrix router_proj;                                       // [E, H]
  std::vector<float> router_scale;                                // [H]
  std::vector<float> router_per_expert_scale;                     // [E]
  std::vector<WeightMatrix> expert_gate, expert_up, expert_down;  // one per expert
  std::vector<float> pre_feedforward_layernorm_2, post_feedforward_layernorm_1, post_feedforward_layernorm_2;

  // Per-layer input (PLE)
  bool ple = false;
  WeightMatrix per_layer_input_gate;  // [W, H]
  WeightMatrix per_layer_projection;  // [H, W]
  std::vector<float> post_per_layer_input_norm;

  float layer_scalar = 1.0f;
};

// How a matrix's bytes are counted: as the checkpoint stores it; as the kernels read it now (its
// packed copy where it has one); or as fast precision will read it once TargetModel has packed
// the matrices, before they are (the figure of a checkpoint loaded only to be summarized).
enum class MatrixBytes { Stored, Packed, FastPrecision };

struct TargetWeights {
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  WeightMatrix embed_tokens;  // [V, H]
  WeightMatrix lm_head;       // the tied embedding unless the checkpoint has lm_head
  std::vector<float> final_norm;
  float embed_scale = 1.0f;  // bf16(sqrt(H)) (docs/gemma4.md §5.2)

  // PLE
  int64_t ple_width = 0;  // hidden_size_per_layer_input (0 = none)
  int64_t ple_vocab = 0;
  WeightMatrix embed_tokens_per_layer;      // [V_ple, NL*W]
  WeightMatrix per_layer_model_projection;  // [NL*W, H]
  std::vector<float> per_layer_projection_norm;

  std::vector<TargetLayerWeights> layers;

  // The sum of bytes(w) over the matrices a decode step reads (routed experts aside).
  uint64_t sum_over_decode_matrices(const std::function<uint64_t(const WeightMatrix&)>& bytes) const;
  // Bytes of the matrices a decode step reads (routed experts aside): as the checkpoint stores
  // them, or as the fast kernels read them (a packed copy where there is one: the same size for
  // MLX layouts, smaller for GGUF K-quants with shared factors).
  uint64_t matrix_bytes_per_token(bool as_packed) const;
  // The same counted as `how` says (model/weight_bytes.cpp, beside the matmul kernels it asks).
  uint64_t matrix_bytes_per_token(MatrixBytes how) const;
  // The part of matrix_bytes_per_token(as_packed) in the attention's q, k and v projections.
  uint64_t attention_input_bytes_per_token(bool as_packed) const;
  // Weight bytes one decode step reads: `summary`'s bytes_per_token (every tensor as stored, the
  // top_k_experts routed experts of each MoE layer included) with the matrices, those experts'
  // too, counted as `how` says. What `bench` reports and `inspect` prints (model/weight_bytes.cpp).
  uint64_t decode_bytes_per_token(const CheckpointSummary& summary, MatrixBytes how) const;
  // Every matrix the forward pass multiplies by (not the embedding tables it only gathers from).
  std::vector<WeightMatrix*> matmul_matrices();
};

// w's bytes as stored, or as its packed copy when as_packed and it has one.
uint64_t stored_or_packed_bytes(const WeightMatrix& w, bool as_packed);

// Readies w for fast precision as TargetModel does before packing (shared factors cleared where
// the kernels do not gain from them) and says whether the fast kernels read it packed
// (model/weight_bytes.cpp).
bool prepare_for_fast_kernels(WeightMatrix& w);

// Builds the views; throws naming the tensor when a vector has an unusable dtype or length.
TargetWeights make_target_weights(const TargetCheckpoint& checkpoint);

// A 1-D tensor (BF16, F16 or F32) widened to f32.
std::vector<float> tensor_to_f32(const TensorView& tensor);

}  // namespace specula
