#pragma once
// The Gemma 4 target model (docs/gemma4.md §5): every text variant — sliding/full layers with their
// own head dims, GQA, q/k norms and the scale-free v norm, attention scale 1.0, default and
// proportional RoPE, k_eq_v full layers, per-layer inputs, KV sharing, double-wide MLPs, the MoE
// block, layer_scalar, final norm, tied LM head and logit softcapping — over dense and
// affine-quantized weights in any mix.
//
// forward() feeds L >= 1 tokens of one sequence at its cache's current position, in chunks of at
// most the cache's max_chunk rows. forward_batch() runs one step over the rows of several
// sequences, each with its own cache and positions: every matmul runs once over all rows of the
// step (the weights stream once), attention runs per sequence over its own cache. Every kernel is
// batch invariant, so a row's hidden state and logits are the same bytes for any chunk size, any
// split into calls, any other sequences sharing the step, and any thread count.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "specula/io/checkpoint.h"
#include "specula/kernels/kv_type.h"
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
  int64_t rollback_reserve = 16;                 // >= the largest speculative gamma
  int64_t max_context = 0;                       // 0 = the config's max_position_embeddings
  Precision precision = Precision::Exact;        // matmul precision of the target (and its drafter)
  KvType kv_type = KvType::F32;                  // element type of the KV caches (kv_type.h)
  // Fast precision: the directory where the packed layout is kept between loads
  // (model/packed_cache.h); empty = no cache file. The CLI sets default_packed_cache_dir().
  std::string packed_cache_dir;
  uint64_t packed_cache_min_bytes = 64ull << 20;  // smaller packed weights are not cached
  // Threads of the load-time work (packing for the fast kernels, the drafter's too); 0 = every
  // hardware thread. The CLI passes --threads.
  int load_threads = 0;
};

// Which of the fed rows come back.
enum class OutputRows { None, Last, All, Selected };

struct ForwardRequest {
  OutputRows rows = OutputRows::Last;
  std::vector<int64_t> selected;  // OutputRows::Selected: indices into the fed tokens, ascending
  bool logits = true;             // softcapped logits of the returned rows
  bool hidden = false;            // final-norm hidden rows (the drafter's input)
  int64_t chunk = 0;              // rows per step; 0 = the cache's max_chunk
};

struct ForwardOutput {
  std::vector<int64_t> rows;  // indices into the fed tokens, ascending
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  std::vector<float> logits;  // rows.size() x vocab_size (if requested)
  std::vector<float> hidden;  // rows.size() x hidden_size (if requested)

  const float* logits_row(size_t i) const { return logits.data() + i * static_cast<size_t>(vocab_size); }
  const float* hidden_row(size_t i) const { return hidden.data() + i * static_cast<size_t>(hidden_size); }
};

// One sequence's part of a batched forward step.
struct SequenceRows {
  TargetCache* cache = nullptr;     // fed at cache->offset(); one entry per cache in a step
  std::span<const int32_t> tokens;  // at most the cache's max_chunk
  ForwardRequest request;           // request.chunk is ignored: the rows form one step
};

struct ForwardStep;  // model/forward_workspace.h
struct ForwardWorkspace;

// Scratch for forward passes, grown to the largest step it has served and then reused, so a
// decode loop allocates nothing per step. One forward at a time per scratch.
class ForwardScratch {
 public:
  ForwardScratch();
  ~ForwardScratch();
  ForwardScratch(ForwardScratch&&) noexcept;
  ForwardScratch& operator=(ForwardScratch&&) noexcept;
  ForwardWorkspace& workspace() { return *ws_; }

 private:
  std::unique_ptr<ForwardWorkspace> ws_;
};

class TargetModel {
 public:
  // Loads and validates a checkpoint directory (io/checkpoint.h) and builds the weight views.
  static std::unique_ptr<TargetModel> load(const std::string& dir, const TargetOptions& options = {});
  // The checkpoint load() builds on: a directory or a GGUF file, whose converted image is cached
  // in options.packed_cache_dir's gguf/ folder (model/gguf_image_cache.h).
  static TargetCheckpoint load_checkpoint(const std::string& path, const TargetOptions& options);
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
  // config eos_token_id ∪ generation_config eos_token_id (docs/gemma4.md §2.5), sorted, unique.
  std::vector<int32_t> eos_token_ids() const;

  // A fresh KV state sized by the options (ring extra = max(reserve, prefill_chunk - 1)).
  TargetCache new_cache() const;

  // Feeds tokens at cache.offset(); advances the cache by tokens.size(). Throws on an empty
  // input, a token outside [0, vocab), a context past max_context(), or a chunk larger than the
  // cache supports — before touching the cache. Also throws, after the cache has advanced, when a
  // returned logits row holds NaN or Inf (corrupt weights; model/logits_check.h).
  // `scratch`: reused between calls when given (else a temporary one).
  ForwardOutput forward(TargetCache& cache, std::span<const int32_t> tokens, const ForwardRequest& request,
                        ThreadPool& pool, ForwardScratch* scratch = nullptr) const;

  // One step over the rows of several sequences; output i belongs to batch[i]. Validates every
  // entry as forward() does (and that no cache appears twice) before touching any cache; each
  // sequence's cache advances by its row count.
  std::vector<ForwardOutput> forward_batch(std::span<const SequenceRows> batch, ThreadPool& pool,
                                           ForwardScratch* scratch = nullptr) const;

 private:
  void check_rows(const TargetCache& cache, std::span<const int32_t> tokens, int64_t max_rows) const;
  ForwardOutput begin_output(const ForwardRequest& request, int64_t n) const;
  void run_step(const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const;
  void embed(const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const;
  void attention_block(int64_t layer, const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const;
  void mlp_branch(int64_t layer, const std::vector<float>& post_norm, const ForwardStep& step, ForwardWorkspace& ws,
                  ThreadPool& pool) const;
  void dense_mlp_block(int64_t layer, const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const;
  void moe_mlp_block(int64_t layer, const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const;
  void per_layer_input_block(int64_t layer, const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const;
  // One returned row: where the step computed it and where its results go.
  struct OutputSlot {
    ForwardOutput* out = nullptr;
    size_t index = 0;      // entry of out->rows
    int64_t step_row = 0;  // row of the step
    int64_t position = 0;  // context position (for the NaN check's message)
  };
  void project_outputs(std::span<const OutputSlot> slots, ForwardWorkspace& ws, ThreadPool& pool) const;
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
