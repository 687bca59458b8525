#pragma once
// The Gemma 4 target model (SPEC §5, Part I): every text variant — sliding/full layers with their
// own head dims, GQA, q/k norms and the scale-free v norm, attention scale 1.0, default and
// proportional RoPE, k_eq_v full layers, per-layer inputs, KV sharing, double-wide MLPs, the MoE
// block, layer_scalar, final norm, tied LM head and logit softcapping — over dense and
// affine-quantized weights in any mix.
//
// forward() feeds L >= 1 tokens at the cache's current position. It runs in chunks of at most
// the cache's max_chunk rows; every kernel is batch invariant, so a row's hidden state and logits
// are the same bytes for any chunk size, any split into calls, and any thread count.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "specula/io/checkpoint.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/model/packed_cache.h"
#include "specula/model/target_cache.h"
#include "specula/model/target_weights.h"
#include "specula/util/thread_pool.h"

namespace specula {

// Prompt rows per forward step by default. Every kernel is batch invariant, so the bytes do not
// depend on it; 128 prefilled a 512-token E4B prompt ~6 % faster than 512 on the 2-core test
// machine (less scratch memory to fault in, a smaller sliding-window ring) and still gives every
// 16-row weight block 128 rows of reuse.
inline constexpr int64_t kDefaultPrefillChunk = 128;

struct TargetOptions {
  int64_t prefill_chunk = kDefaultPrefillChunk;  // rows per forward step (and the caches' max_chunk)
  int64_t rollback_reserve = 16;   // >= the largest speculative gamma
  int64_t max_context = 0;         // 0 = the config's max_position_embeddings
  Precision precision = Precision::Exact;  // matmul precision of the target (and its drafter)
  // Fast precision: the directory where the packed layout is kept between loads
  // (model/packed_cache.h); empty = no cache file. The CLI sets default_packed_cache_dir().
  std::string packed_cache_dir;
  uint64_t packed_cache_min_bytes = 64ull << 20;  // smaller packed weights are not cached
};

// Which of the fed rows come back.
enum class OutputRows { None, Last, All, Selected };

struct ForwardRequest {
  OutputRows rows = OutputRows::Last;
  std::vector<int64_t> selected;   // OutputRows::Selected: indices into the fed tokens, ascending
  bool logits = true;              // softcapped logits of the returned rows
  bool hidden = false;             // final-norm hidden rows (the drafter's input)
  int64_t chunk = 0;               // rows per step; 0 = the cache's max_chunk
};

struct ForwardOutput {
  std::vector<int64_t> rows;       // indices into the fed tokens, ascending
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  std::vector<float> logits;       // rows.size() x vocab_size (if requested)
  std::vector<float> hidden;       // rows.size() x hidden_size (if requested)

  const float* logits_row(size_t i) const { return logits.data() + i * static_cast<size_t>(vocab_size); }
  const float* hidden_row(size_t i) const { return hidden.data() + i * static_cast<size_t>(hidden_size); }
};

class TargetModel {
 public:
  // Loads and validates a checkpoint directory (io/checkpoint.h) and builds the weight views.
  static std::unique_ptr<TargetModel> load(const std::string& dir, const TargetOptions& options = {});
  TargetModel(std::unique_ptr<TargetCheckpoint> checkpoint, const TargetOptions& options);

  const TargetConfig& config() const { return checkpoint_->config; }
  const TargetCheckpoint& checkpoint() const { return *checkpoint_; }
  const TargetWeights& weights() const { return weights_; }
  const TargetOptions& options() const { return options_; }
  int64_t vocab_size() const { return weights_.vocab_size; }
  int64_t hidden_size() const { return weights_.hidden_size; }
  // The longest context accepted: min(max_position_embeddings, options.max_context).
  int64_t max_context() const { return max_context_; }
  // Where the fast kernels' layout came from at load (None in exact precision).
  PackedSource packed_source() const { return packed_.source; }
  // config eos_token_id ∪ generation_config eos_token_id (SPEC Part I #6), sorted, unique.
  std::vector<int32_t> eos_token_ids() const;

  // A fresh KV state sized by the options (ring extra = max(reserve, prefill_chunk - 1)).
  TargetCache new_cache() const;

  // Feeds tokens at cache.offset(); advances the cache by tokens.size(). Throws on an empty
  // input, a token outside [0, vocab), a context past max_context(), or a chunk larger than the
  // cache supports — before touching the cache. Also throws, after the cache has advanced, when a
  // returned logits row holds NaN or Inf (corrupt weights; model/logits_check.h).
  ForwardOutput forward(TargetCache& cache, std::span<const int32_t> tokens, const ForwardRequest& request,
                        ThreadPool& pool) const;

 private:
  struct Workspace;
  void forward_chunk(TargetCache& cache, const int32_t* tokens, int64_t n, Workspace& ws, ThreadPool& pool) const;
  void pack_for_fast_kernels();
  void fuse_projections();

  std::unique_ptr<TargetCheckpoint> checkpoint_;
  TargetOptions options_;
  TargetWeights weights_;
  PackedWeights packed_;  // fast precision: the quantized matrices in the fast kernels' layout
  // Per layer, fast precision: q/k(/v) and gate/up as one packed matrix each (model/fused_matrices.h).
  struct FusedProjections {
    std::optional<WeightMatrix> qkv, gate_up;
  };
  std::vector<FusedProjections> fused_;
  int64_t max_context_ = 0;
};

}  // namespace specula
