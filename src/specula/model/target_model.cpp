#include "specula/model/target_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "specula/io/eos_set.h"
#include "specula/kernels/activation.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/rms_norm.h"
#include "specula/kernels/softmax.h"
#include "specula/model/forward_workspace.h"
#include "specula/model/fused_matrices.h"
#include "specula/model/gguf_image_cache.h"
#include "specula/model/gguf_target.h"
#include "specula/model/logits_check.h"
#include "specula/util/error.h"

namespace specula {

ForwardScratch::ForwardScratch() : ws_(std::make_unique<ForwardWorkspace>()) {}
ForwardScratch::~ForwardScratch() = default;
ForwardScratch::ForwardScratch(ForwardScratch&&) noexcept = default;
ForwardScratch& ForwardScratch::operator=(ForwardScratch&&) noexcept = default;

TargetCheckpoint TargetModel::load_checkpoint(const std::string& path, const TargetOptions& options) {
  GgufLoadOptions gguf;
  gguf.image_cache_dir = gguf_image_cache_dir(options.packed_cache_dir);
  return load_any_target(path, gguf);
}

std::unique_ptr<TargetModel> TargetModel::load(const std::string& dir, const TargetOptions& options) {
  return std::make_unique<TargetModel>(std::make_unique<TargetCheckpoint>(load_checkpoint(dir, options)), options);
}

TargetModel::TargetModel(std::unique_ptr<TargetCheckpoint> checkpoint, const TargetOptions& options)
    : checkpoint_(std::move(checkpoint)), options_(options) {
  if (options_.prefill_chunk < 1) fail("prefill chunk {} must be >= 1", options_.prefill_chunk);
  if (options_.rollback_reserve < 0) fail("rollback reserve {} must be >= 0", options_.rollback_reserve);
  if (options_.max_context < 0) fail("context limit {} must be >= 0", options_.max_context);
  weights_ = make_target_weights(*checkpoint_);
  const TextConfig& t = checkpoint_->config.text;
  max_context_ = t.max_position_embeddings;
  if (options_.max_context > max_context_)
    fail(
        "context limit {} is above the model's max_position_embeddings {} ({}): it was not trained for longer "
        "contexts (0 = the model's own limit)",
        options_.max_context, max_context_, checkpoint_->config.source);
  if (options_.max_context > 0) max_context_ = options_.max_context;
  if (t.enable_moe_block && (t.top_k_experts < 1 || t.top_k_experts > t.num_experts))
    fail("{}: top_k_experts {} must be in [1, num_experts = {}]", checkpoint_->config.source, t.top_k_experts,
         t.num_experts);
  for (const LayerGeometry& g : checkpoint_->config.layers) {
    if (g.type == LayerType::Sliding && t.sliding_window <= 0)
      fail("{}: layer {} is sliding_attention but sliding_window is {}", checkpoint_->config.source, g.index,
           t.sliding_window);
    if (t.num_attention_heads % g.num_kv_heads != 0)
      fail("{}: layer {} has {} attention heads, not a multiple of its {} KV heads", checkpoint_->config.source,
           g.index, t.num_attention_heads, g.num_kv_heads);
  }
  if (is_low_precision(options_.precision)) {
    pack_for_fast_kernels();
    fuse_projections();
  }
}

void TargetModel::fuse_projections() {
  fused_.resize(weights_.layers.size());
  for (size_t li = 0; li < weights_.layers.size(); ++li) {
    const TargetLayerWeights& L = weights_.layers[li];
    if (L.k_proj && L.v_proj) {
      fused_[li].qkv = fuse_packed({&L.q_proj, &*L.k_proj, &*L.v_proj});
    } else if (L.k_proj) {
      fused_[li].qkv = fuse_packed({&L.q_proj, &*L.k_proj});  // k = v layers
    }
    fused_[li].gate_up = fuse_packed({&L.gate_proj, &L.up_proj});
  }
}

// Fast precision reads quantized matrices in their packed layout (kernels/packed_affine.h): map
// it from the cache file when one matches (model/packed_cache.h), else pack them once here and
// let go of each one's checkpoint pages once packed, so the model holds the weights once, not
// twice (gathers from the embedding tables fault their rows back in).
void TargetModel::pack_for_fast_kernels() {
  std::vector<WeightMatrix*> fast;
  for (WeightMatrix* w : weights_.matmul_matrices()) {
    if (prepare_for_fast_kernels(*w)) fast.push_back(w);
  }
  const TensorStore& store = checkpoint_->store;
  PackedCacheOptions cache;
  cache.dir = options_.packed_cache_dir;
  cache.min_bytes = options_.packed_cache_min_bytes;
  ThreadPool pool(options_.load_threads);
  packed_ = load_packed_weights(store, fast, cache, pool, [&store](const WeightMatrix& w) {
    const auto groups = static_cast<size_t>(w.rows * w.groups_per_row()) * dtype_size(w.scale_dtype);
    store.release_pages(w.data, static_cast<size_t>(w.rows * w.row_bytes()));
    store.release_pages(w.scales, groups);
    store.release_pages(w.biases, groups);
  });
}

std::vector<int32_t> TargetModel::eos_token_ids() const {
  return eos_token_set(config().eos_token_ids, checkpoint_->generation ? &*checkpoint_->generation : nullptr);
}

TargetCache TargetModel::new_cache() const {
  CacheOptions o;
  o.rollback_reserve = options_.rollback_reserve;
  o.max_chunk = options_.prefill_chunk;
  o.kv_type = options_.kv_type;
  return TargetCache(config(), o);
}

void TargetModel::check_rows(const TargetCache& cache, std::span<const int32_t> tokens, int64_t max_rows) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t vocab = weights_.vocab_size;
  if (n == 0) fail("forward: no tokens to feed");
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab)
      fail("token id {} at index {} is outside the vocabulary [0, {})", tokens[i], i, vocab);
  }
  if (cache.offset() + n > max_context_)
    fail("context of {} tokens ({} cached + {} new) exceeds the limit of {} ({})", cache.offset() + n, cache.offset(),
         n, max_context_,
         max_context_ == config().text.max_position_embeddings ? "max_position_embeddings" : "configured limit");
  if (max_rows > cache.options().max_chunk)
    fail("forward chunk of {} rows exceeds the cache's maximum chunk of {}", max_rows, cache.options().max_chunk);
}

// The output rows a request asks for, with room for their logits / hidden rows.
ForwardOutput TargetModel::begin_output(const ForwardRequest& request, int64_t n) const {
  ForwardOutput out;
  out.vocab_size = weights_.vocab_size;
  out.hidden_size = weights_.hidden_size;
  switch (request.rows) {
    case OutputRows::None: break;
    case OutputRows::Last: out.rows.push_back(n - 1); break;
    case OutputRows::All:
      for (int64_t i = 0; i < n; ++i) out.rows.push_back(i);
      break;
    case OutputRows::Selected:
      for (size_t i = 0; i < request.selected.size(); ++i) {
        const int64_t r = request.selected[i];
        if (r < 0 || r >= n) fail("forward: requested output row {} is outside the {} fed tokens", r, n);
        if (i > 0 && r <= request.selected[i - 1]) fail("forward: requested output rows must be ascending and unique");
        out.rows.push_back(r);
      }
      break;
  }
  const size_t m = out.rows.size();
  if (request.logits) out.logits.resize(m * static_cast<size_t>(out.vocab_size));
  if (request.hidden) out.hidden.resize(m * static_cast<size_t>(out.hidden_size));
  return out;
}

ForwardOutput TargetModel::forward(TargetCache& cache, std::span<const int32_t> tokens, const ForwardRequest& request,
                                   ThreadPool& pool, ForwardScratch* scratch) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t chunk = request.chunk > 0 ? request.chunk : cache.options().max_chunk;
  check_rows(cache, tokens, chunk);
  ForwardOutput out = begin_output(request, n);

  ForwardScratch local;
  ForwardWorkspace& ws = scratch ? scratch->workspace() : local.workspace();
  ForwardStep& step = ws.step;
  std::vector<OutputSlot> slots;
  size_t next = 0;  // next entry of out.rows to produce
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t cn = std::min(chunk, n - c0);
    const int64_t position = cache.offset();
    step.clear();
    step.add(cache, tokens.subspan(static_cast<size_t>(c0), static_cast<size_t>(cn)));
    run_step(step, ws, pool);
    slots.clear();
    for (; next < out.rows.size() && out.rows[next] < c0 + cn; ++next)
      slots.push_back(OutputSlot{&out, next, out.rows[next] - c0, position + out.rows[next] - c0});
    project_outputs(slots, ws, pool);
  }
  return out;
}

std::vector<ForwardOutput> TargetModel::forward_batch(std::span<const SequenceRows> batch, ThreadPool& pool,
                                                      ForwardScratch* scratch) const {
  if (batch.empty()) fail("forward_batch: no sequences in the step");
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].cache == nullptr) fail("forward_batch: sequence {} has no cache", i);
    check_rows(*batch[i].cache, batch[i].tokens, static_cast<int64_t>(batch[i].tokens.size()));
    for (size_t j = 0; j < i; ++j)
      if (batch[j].cache == batch[i].cache) fail("forward_batch: sequences {} and {} share one cache", j, i);
  }
  std::vector<ForwardOutput> outs;
  outs.reserve(batch.size());
  for (const SequenceRows& s : batch) outs.push_back(begin_output(s.request, static_cast<int64_t>(s.tokens.size())));

  ForwardScratch local;
  ForwardWorkspace& ws = scratch ? scratch->workspace() : local.workspace();
  ForwardStep& step = ws.step;
  step.clear();
  for (const SequenceRows& s : batch) step.add(*s.cache, s.tokens);
  run_step(step, ws, pool);
  std::vector<OutputSlot> slots;
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardStep::Sequence& seq = step.sequences[i];
    for (size_t k = 0; k < outs[i].rows.size(); ++k)
      slots.push_back(OutputSlot{&outs[i], k, seq.first_row + outs[i].rows[k], seq.position + outs[i].rows[k]});
  }
  project_outputs(slots, ws, pool);
  return outs;
}

// Final norm of every listed row, then the LM head once over the rows whose request wants logits
// (one pass over its weights for the whole step).
void TargetModel::project_outputs(std::span<const OutputSlot> slots, ForwardWorkspace& ws, ThreadPool& pool) const {
  const int64_t m = static_cast<int64_t>(slots.size());
  if (m == 0) return;
  const int64_t H = weights_.hidden_size;
  const int64_t vocab = weights_.vocab_size;
  const float eps = static_cast<float>(config().text.rms_norm_eps);
  ensure(ws.hidden, m * H);
  int64_t heads = 0;  // rows that go through the LM head
  for (int64_t i = 0; i < m; ++i) {
    const OutputSlot& s = slots[static_cast<size_t>(i)];
    float* h = ws.hidden.data() + i * H;
    rms_norm(ws.x.data() + s.step_row * H, 1, H, H, weights_.final_norm.data(), eps, h, H);
    if (!s.out->hidden.empty()) std::memcpy(s.out->hidden.data() + s.index * H, h, sizeof(float) * H);
    if (!s.out->logits.empty()) ++heads;
  }
  if (heads == 0) return;
  const bool all_rows = heads == m;
  if (!all_rows) {
    ensure(ws.head_in, heads * H);
    int64_t j = 0;
    for (int64_t i = 0; i < m; ++i)
      if (!slots[static_cast<size_t>(i)].out->logits.empty())
        std::memcpy(ws.head_in.data() + (j++) * H, ws.hidden.data() + i * H, sizeof(float) * H);
  }
  // A single request's logits go straight into its output; a step's rows of several outputs
  // through one buffer.
  const bool direct = slots.front().out == slots.back().out && all_rows;
  if (!direct) ensure(ws.logits, heads * vocab);
  float* lg = direct ? slots.front().out->logits.data() + slots.front().index * vocab : ws.logits.data();
  matmul(all_rows ? ws.hidden.data() : ws.head_in.data(), heads, weights_.lm_head, lg, pool, options_.precision);
  if (config().text.final_logit_softcapping) {
    // tanh over every vocabulary entry of every row costs ~5 ms per 262k-wide row: all threads
    // (elementwise, so the bytes do not depend on the split).
    const auto cap = static_cast<float>(*config().text.final_logit_softcapping);
    pool.parallel_for(heads * vocab, 4096, [&](int, int64_t b, int64_t e) { softcap_inplace(lg + b, e - b, cap); });
  }
  int64_t j = 0;
  for (const OutputSlot& s : slots) {
    if (s.out->logits.empty()) continue;
    const float* row = lg + (j++) * vocab;
    require_finite_logits(row, vocab, s.position, checkpoint_->dir);
    if (!direct) std::memcpy(s.out->logits.data() + s.index * vocab, row, sizeof(float) * vocab);
  }
}

}  // namespace specula
