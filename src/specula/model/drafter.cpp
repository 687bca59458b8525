#include "specula/model/drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "specula/kernels/activation.h"
#include "specula/kernels/affine_copy.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/rms_norm.h"
#include "specula/kernels/softmax.h"
#include "specula/model/attention_block.h"
#include "specula/model/gguf_image_cache.h"
#include "specula/model/gguf_target.h"
#include "specula/model/layer_ops.h"
#include "specula/model/target_weights.h"
#include "specula/model/token_clusters.h"
#include "specula/util/error.h"

namespace specula {

const char* drafter_convention_name(DrafterConvention c) {
  return c == DrafterConvention::Ollama ? "ollama" : "mlx-bun";
}

DrafterConvention parse_drafter_convention(const std::string& name) {
  if (name == "ollama") return DrafterConvention::Ollama;
  if (name == "mlx-bun") return DrafterConvention::MlxBun;
  fail("unknown drafter convention '{}' (expected 'ollama' or 'mlx-bun')", name);
}

const char* drafter_quant_name(DrafterQuant q) {
  switch (q) {
    case DrafterQuant::Auto: return "auto";
    case DrafterQuant::None: return "none";
    case DrafterQuant::Q4: return "q4";
    case DrafterQuant::Q8: return "q8";
  }
  return "?";
}

const char* drafter_head_name(DrafterHead h) { return h == DrafterHead::Stored ? "stored" : "clusters"; }

DrafterHead parse_drafter_head(const std::string& name) {
  if (name == "stored") return DrafterHead::Stored;
  if (name == "clusters") return DrafterHead::Clusters;
  fail("unknown drafter head '{}' (expected 'stored' or 'clusters')", name);
}

DrafterQuant parse_drafter_quant(const std::string& name) {
  for (DrafterQuant q : {DrafterQuant::Auto, DrafterQuant::None, DrafterQuant::Q4, DrafterQuant::Q8}) {
    if (name == drafter_quant_name(q)) return q;
  }
  fail("unknown drafter quantization '{}' (expected auto, none, q4 or q8)", name);
}

int drafter_quant_bits(DrafterQuant q, bool centroid_head, Precision precision) {
  switch (q) {
    case DrafterQuant::Auto: return !centroid_head && is_low_precision(precision) ? 4 : 0;
    case DrafterQuant::None: return 0;
    case DrafterQuant::Q4: return 4;
    case DrafterQuant::Q8: return 8;
  }
  return 0;
}

std::vector<DraftCandidate> DraftStep::top(size_t n) const {
  std::vector<DraftCandidate> all(candidate_ids.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = {candidate_ids[i], candidate_scores[i]};
  n = std::min(n, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const DraftCandidate& a, const DraftCandidate& b) {
                      return a.score != b.score ? a.score > b.score : a.id < b.id;
                    });
  all.resize(n);
  return all;
}

struct Drafter::Layer {
  LayerGeometry geometry;
  RopeFrequencies rope;
  float scale = 1.0f;
  WeightMatrix q_proj, o_proj, gate_proj, up_proj, down_proj;
  std::vector<float> q_norm, input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;
  float layer_scalar = 1.0f;
};

// Activations of a batched step's rows ([rows][width] each), grown and reused.
struct Drafter::Workspace {
  std::vector<float> concat, x, normed, branch, gate, up, cos, sin, gathered, centroid_scores, dense_scores;
  AttentionBuffers attention;
  std::vector<AttentionRows> attention_rows;
  std::vector<int64_t> positions, top;
  // Fast precision: the candidate rows of the centroid head copied in their stored format.
  std::vector<uint8_t> raw_rows, raw_scales, raw_biases;
  // A built head: the candidates' rows in its cluster-ordered table, or their packed blocks.
  std::vector<int32_t> table_rows;
  std::vector<uint8_t> packed_rows;
};

namespace {

std::vector<float> vector_of(const TensorView* t, int64_t length, const std::string& what) {
  if (t == nullptr) fail("drafter tensor {} is missing", what);
  std::vector<float> v = tensor_to_f32(*t);
  if (static_cast<int64_t>(v.size()) != length)
    fail("drafter tensor {} has {} values, expected {}", t->name, v.size(), length);
  return v;
}

// Rows ids[0..n) of `table` copied into the buffers, as a matrix of the same format (the ids were
// checked against the table by the caller's token ordering). The rows are scattered over a table
// of hundreds of MB, so the copy waits on memory: it runs on the pool's threads and fetches a few
// rows ahead.
WeightMatrix gather_stored_rows(const WeightMatrix& table, const int32_t* ids, int64_t n, std::vector<uint8_t>& data,
                                std::vector<uint8_t>& scales, std::vector<uint8_t>& biases, ThreadPool& pool) {
  WeightMatrix rows = table;
  rows.rows = n;
  const auto row_bytes = static_cast<size_t>(table.row_bytes());
  data.resize(row_bytes * static_cast<size_t>(n));
  const size_t sb_bytes = static_cast<size_t>(table.groups_per_row()) * dtype_size(table.scale_dtype);
  const bool affine = table.format == WeightFormat::Affine;
  if (affine) {
    scales.resize(sb_bytes * static_cast<size_t>(n));
    biases.resize(sb_bytes * static_cast<size_t>(n));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= table.rows)
      fail("drafter: candidate id {} is outside the embedding's {} rows", ids[i], table.rows);
  }
  const auto* src = static_cast<const uint8_t*>(table.data);
  constexpr int64_t kAhead = 8;  // rows fetched ahead of the one copied
  pool.parallel_for(n, 64, [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i + kAhead < end) {
        const uint8_t* next = src + row_bytes * static_cast<size_t>(ids[i + kAhead]);
        for (size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(next + b);
      }
      const auto id = static_cast<size_t>(ids[i]);
      std::memcpy(data.data() + row_bytes * static_cast<size_t>(i), src + row_bytes * id, row_bytes);
      if (affine) {
        std::memcpy(scales.data() + sb_bytes * static_cast<size_t>(i),
                    static_cast<const uint8_t*>(table.scales) + sb_bytes * id, sb_bytes);
        std::memcpy(biases.data() + sb_bytes * static_cast<size_t>(i),
                    static_cast<const uint8_t*>(table.biases) + sb_bytes * id, sb_bytes);
      }
    }
  });
  rows.data = data.data();
  if (affine) {
    rows.scales = scales.data();
    rows.biases = biases.data();
  }
  return rows;
}

}  // namespace

std::unique_ptr<Drafter> Drafter::load(const std::string& dir, const TargetModel& target, DrafterConvention convention,
                                       DrafterQuant quant, DrafterHead head) {
  GgufLoadOptions gguf;
  gguf.image_cache_dir = gguf_image_cache_dir(target.options().packed_cache_dir);
  auto ck = std::make_unique<DrafterCheckpoint>(load_any_drafter(dir, gguf));
  return std::make_unique<Drafter>(std::move(ck), target, convention, quant, head);
}

Drafter::~Drafter() = default;

Drafter::Drafter(std::unique_ptr<DrafterCheckpoint> checkpoint, const TargetModel& target, DrafterConvention convention,
                 DrafterQuant quant, DrafterHead head)
    : checkpoint_(std::move(checkpoint)), target_(target), convention_(convention), ws_(std::make_unique<Workspace>()) {
  const DrafterCheckpoint& ck = *checkpoint_;
  const DrafterConfig& cfg = ck.config;
  const std::vector<std::string> problems = check_drafter_compat(target.config(), cfg);
  if (!problems.empty()) {
    std::string msg = fmt::format("drafter {} does not fit target {}:", ck.dir, target.checkpoint().dir);
    for (const auto& p : problems) msg += "\n  - " + p;
    throw Error(msg);
  }
  hidden_ = cfg.text.hidden_size;
  backbone_ = cfg.backbone_hidden_size;
  vocab_ = cfg.text.vocab_size;
  eps_ = static_cast<float>(cfg.text.rms_norm_eps);
  sliding_donor_ = target.config().last_sliding_donor;
  full_donor_ = target.config().last_full_donor;

  pre_projection_ = weight_matrix(ck.pre_projection);
  post_projection_ = weight_matrix(ck.post_projection);
  embed_tokens_ = weight_matrix(ck.lm_head && !ck.centroid_head ? *ck.lm_head : ck.embed_tokens);
  if (pre_projection_.rows != hidden_ || pre_projection_.cols != 2 * backbone_)
    fail("drafter {}: pre_projection is [{}, {}], expected [{}, {}]", ck.dir, pre_projection_.rows,
         pre_projection_.cols, hidden_, 2 * backbone_);
  if (post_projection_.rows != backbone_ || post_projection_.cols != hidden_)
    fail("drafter {}: post_projection is [{}, {}], expected [{}, {}]", ck.dir, post_projection_.rows,
         post_projection_.cols, backbone_, hidden_);
  if (embed_tokens_.rows != vocab_ || embed_tokens_.cols != hidden_)
    fail("drafter {}: the head table is [{}, {}], expected [{}, {}]", ck.dir, embed_tokens_.rows, embed_tokens_.cols,
         vocab_, hidden_);
  final_norm_ = vector_of(ck.final_norm, hidden_, "model.norm.weight");

  if (ck.centroid_head) use_stored_centroid_head();

  const int nl = static_cast<int>(ck.layers.size());
  if (nl != static_cast<int>(cfg.layers.size()))
    fail("drafter {}: {} layer module sets but the config describes {} layers", ck.dir, nl, cfg.layers.size());
  layers_.resize(static_cast<size_t>(nl));
  for (int i = 0; i < nl; ++i) {
    const DrafterLayerModules& m = ck.layers[static_cast<size_t>(i)];
    Layer& L = layers_[static_cast<size_t>(i)];
    L.geometry = cfg.layers[static_cast<size_t>(i)];
    const int64_t D = L.geometry.head_dim;
    const std::string what = fmt::format("drafter layer {} ({})", i, layer_type_name(L.geometry.type));
    L.rope = make_rope_frequencies(L.geometry.rope.type, L.geometry.rope.theta, L.geometry.rope.partial_rotary_factor,
                                   L.geometry.rope.factor, D, what);
    L.scale =
        convention == DrafterConvention::Ollama ? 1.0f : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    L.q_proj = weight_matrix(m.q_proj);
    L.o_proj = weight_matrix(m.o_proj);
    L.gate_proj = weight_matrix(m.gate_proj);
    L.up_proj = weight_matrix(m.up_proj);
    L.down_proj = weight_matrix(m.down_proj);
    const std::string p = fmt::format("model.layers.{}.", i);
    L.q_norm = vector_of(m.q_norm, D, p + "self_attn.q_norm.weight");
    L.input_layernorm = vector_of(m.input_layernorm, hidden_, p + "input_layernorm.weight");
    L.post_attention_layernorm = vector_of(m.post_attention_layernorm, hidden_, p + "post_attention_layernorm.weight");
    L.pre_feedforward_layernorm =
        vector_of(m.pre_feedforward_layernorm, hidden_, p + "pre_feedforward_layernorm.weight");
    L.post_feedforward_layernorm =
        vector_of(m.post_feedforward_layernorm, hidden_, p + "post_feedforward_layernorm.weight");
    if (m.layer_scalar != nullptr) L.layer_scalar = vector_of(m.layer_scalar, 1, p + "layer_scalar")[0];
    if (L.q_proj.cols != hidden_ || L.q_proj.rows % D != 0)
      fail("drafter {}: {}self_attn.q_proj is [{}, {}], expected [heads*{}, {}]", ck.dir, p, L.q_proj.rows,
           L.q_proj.cols, D, hidden_);
  }
  ThreadPool pool(target.options().load_threads);
  if (head == DrafterHead::Clusters && !ck.centroid_head) build_candidate_head(pool);
  copy_dense_matrices(drafter_quant_bits(quant, ck.centroid_head, target.options().precision), pool);
  if (built_head() && embed_tokens_.data != ordered_rows_.data()) {  // copied: the copy is read instead
    ordered_rows_ = {};
    ordered_scales_ = {};
    ordered_biases_ = {};
  }
  if (is_low_precision(target.options().precision)) {
    // Quantized matrices: the fast kernels' layout once here rather than per step (a stored
    // centroid head's rows are gathered per step and packed then).
    std::vector<WeightMatrix*> fast = matrices();
    if (centroid_head()) std::erase(fast, &embed_tokens_);
    for (WeightMatrix* w : fast) use_shared_factors_where_they_pay(*w);
    std::erase_if(fast, [](const WeightMatrix* w) { return !packable(*w) || !fast_matmul_supported(*w); });
    packed_ = pack_matrices(fast, pool);
  }
  map_pages_in();
}

// The checkpoint's centroids and token ordering (E2B/E4B assistants), checked against the vocabulary.
void Drafter::use_stored_centroid_head() {
  const DrafterCheckpoint& ck = *checkpoint_;
  const DrafterConfig& cfg = ck.config;
  if (!ck.centroids || ck.token_ordering == nullptr)
    fail("drafter {}: the centroid head needs masked_embedding.centroids and masked_embedding.token_ordering", ck.dir);
  centroids_ = weight_matrix(*ck.centroids);
  clusters_ = cfg.num_centroids;
  top_clusters_ = cfg.centroid_intermediate_top_k;
  if (clusters_ <= 0 || vocab_ % clusters_ != 0 || centroids_.rows != clusters_ || top_clusters_ <= 0 ||
      top_clusters_ > clusters_)
    fail("drafter {}: centroid head geometry invalid (num_centroids {}, centroids rows {}, top_k {}, vocab {})", ck.dir,
         clusters_, centroids_.rows, top_clusters_, vocab_);
  cluster_size_ = vocab_ / clusters_;
  const TensorView& ord = *ck.token_ordering;
  if (ord.numel() != vocab_)
    fail("drafter {}: masked_embedding.token_ordering has {} entries, expected {}", ck.dir, ord.numel(), vocab_);
  token_ordering_.resize(static_cast<size_t>(vocab_));
  for (int64_t i = 0; i < vocab_; ++i) {
    int64_t v = 0;
    if (ord.dtype == DType::I64) {
      std::memcpy(&v, ord.data + i * 8, 8);
    } else if (ord.dtype == DType::I32) {
      int32_t w = 0;
      std::memcpy(&w, ord.data + i * 4, 4);
      v = w;
    } else {
      fail("drafter {}: masked_embedding.token_ordering must be int64 or int32", ck.dir);
    }
    if (v < 0 || v >= vocab_)
      fail("drafter {}: masked_embedding.token_ordering[{}] = {} is outside [0, {})", ck.dir, i, v, vocab_);
    token_ordering_[static_cast<size_t>(i)] = static_cast<int32_t>(v);
  }
}

// DrafterHead::Clusters: the dense head's table split into balanced clusters, scored like a
// centroid head. Built from the stored values, before any affine copy replaces them.
void Drafter::build_candidate_head(ThreadPool& pool) {
  if (token_cluster_count(vocab_) == 0)
    fail("drafter {}: --draft-head clusters needs a vocabulary of a multiple of 256 tokens; it has {}",
         checkpoint_->dir, vocab_);
  TokenClusters built = build_token_clusters(embed_tokens_, pool);
  built_centroids_ = std::move(built.centroids);
  token_ordering_ = std::move(built.token_ordering);
  clusters_ = built.clusters;
  cluster_size_ = built.cluster_size;
  top_clusters_ = built.top_clusters;
  // The table's rows in cluster order, so that a step reads each chosen cluster as one run.
  const WeightMatrix stored = embed_tokens_;
  embed_tokens_ =
      gather_stored_rows(stored, token_ordering_.data(), vocab_, ordered_rows_, ordered_scales_, ordered_biases_, pool);
  checkpoint_->store.release_pages(stored.data, static_cast<size_t>(stored.rows * stored.row_bytes()));
  centroids_ = WeightMatrix{};
  centroids_.format = WeightFormat::F32;
  centroids_.rows = clusters_;
  centroids_.cols = hidden_;
  centroids_.data = built_centroids_.data();
}

std::vector<WeightMatrix*> Drafter::matrices() {
  std::vector<WeightMatrix*> all = {&pre_projection_, &post_projection_, &embed_tokens_};
  if (candidate_head()) all.push_back(&centroids_);
  for (Layer& L : layers_) {
    for (WeightMatrix* w : {&L.q_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj}) all.push_back(w);
  }
  return all;
}

// Every step reads all of the drafter's matrices, and its head scatters over the whole token
// table: left to first touches, their pages were faulted in region by region, and the first
// 4-draft round of a process took 70-100 ms, not 45-55. Packed matrices are read from their packed
// copy, and affine copies are not in the mapping (populate_pages ignores them).
void Drafter::map_pages_in() {
  const TensorStore& store = checkpoint_->store;
  for (const WeightMatrix* w : matrices()) {
    if (w->packed != nullptr) continue;
    store.populate_pages(w->data, static_cast<size_t>(w->rows * w->row_bytes()));
    if (w->format == WeightFormat::Affine) {
      const auto params = static_cast<size_t>(w->rows * w->groups_per_row()) * dtype_size(w->scale_dtype);
      store.populate_pages(w->scales, params);
      store.populate_pages(w->biases, params);
    }
  }
}

void Drafter::copy_dense_matrices(int bits, ThreadPool& pool) {
  if (bits == 0) return;
  constexpr int kGroupSize = 64;  // the group of the MLX 4-bit checkpoints, whose kernels it uses
  std::vector<WeightMatrix*> dense = matrices();
  std::erase_if(dense, [](const WeightMatrix* w) { return !affine_copyable(*w, kGroupSize); });
  copies_.reserve(dense.size());
  for (WeightMatrix* w : dense) {
    copies_.emplace_back(*w, bits, kGroupSize, pool);
    checkpoint_->store.release_pages(w->data, static_cast<size_t>(w->rows * w->row_bytes()));  // read once
    *w = copies_.back().matrix();
  }
  if (!copies_.empty()) copy_bits_ = bits;
}

std::string drafter_head_note(const Drafter& drafter) {
  if (drafter.built_head()) return fmt::format("candidate head of {} clusters built at load", drafter.clusters());
  return drafter.centroid_head() ? "centroid head" : "dense head";
}

std::string drafter_built_note(const Drafter& drafter) {
  std::string note = drafter_copies_note(drafter);
  if (drafter.built_head()) note += (note.empty() ? "" : ", ") + drafter_head_note(drafter);
  return note;
}

std::string drafter_copies_note(const Drafter& drafter) {
  if (drafter.copy_bits() == 0) return {};
  return fmt::format("{}-bit copies of {} matrices", drafter.copy_bits(), drafter.copied_matrices());
}

DraftStep Drafter::step(int32_t token, const float* g, const TargetCache& cache, int64_t k, ThreadPool& pool) const {
  const DraftRow row{token, g, &cache, k};
  return std::move(step_batch(std::span<const DraftRow>(&row, 1), pool).front());
}

std::vector<DraftStep> Drafter::step_batch(std::span<const DraftRow> rows, ThreadPool& pool) const {
  if (rows.empty()) fail("drafter: a step of no rows");
  for (const DraftRow& r : rows) {
    if (r.cache == nullptr || r.cache->offset() < 1)
      fail("drafter: the target cache is empty (prefill the prompt first)");
    if (r.token < 0 || r.token >= vocab_) fail("drafter: token {} outside the vocabulary [0, {})", r.token, vocab_);
  }
  Workspace& ws = *ws_;
  const auto n = static_cast<int64_t>(rows.size());
  const Linear linear{pool, target_.options().precision, true};
  std::vector<DraftStep> out(rows.size());
  ws.positions.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t offset = rows[i].cache->offset();
    out[i].position = ws.positions[i] = convention_ == DrafterConvention::Ollama ? offset - 1 : offset - 1 + rows[i].k;
  }
  embed(rows, ws, linear);
  for (const Layer& L : layers_) {
    attention_block(L, rows, ws, linear);
    mlp_block(L, n, ws, linear);
  }
  float* x = ws.x.data();
  rms_norm_rows(pool, x, n, hidden_, final_norm_.data(), eps_, x);
  ensure(ws.branch, n * backbone_);
  linear(x, n, post_projection_, ws.branch.data());
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)].post_projection.assign(ws.branch.data() + i * backbone_,
                                                       ws.branch.data() + (i + 1) * backbone_);
  head(n, out, linear);
  return out;
}

// Input: [target embedding * bf16(sqrt(H_b)), g] -> pre_projection.
void Drafter::embed(std::span<const DraftRow> rows, Workspace& ws, const Linear& linear) const {
  const TargetWeights& tw = target_.weights();
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t Hb = backbone_;
  ensure(ws.concat, n * 2 * Hb);
  for (int64_t i = 0; i < n; ++i) {
    float* c = ws.concat.data() + i * 2 * Hb;
    dequantize_row(tw.embed_tokens, rows[static_cast<size_t>(i)].token, c);
    for (int64_t j = 0; j < Hb; ++j) c[j] *= tw.embed_scale;
    std::memcpy(c + Hb, rows[static_cast<size_t>(i)].hidden, sizeof(float) * static_cast<size_t>(Hb));
  }
  ensure(ws.x, n * hidden_);
  linear(ws.concat.data(), n, pre_projection_, ws.x.data());
}

// The shared attention block (model/attention_block.h), Q-only over the donor layer's cache of
// each row's sequence: the row is a query at the newest committed key position offset - 1, so it
// sees the cache's last min(offset, W) keys on ring caches and all keys on full caches, while its
// RoPE position is the convention's.
void Drafter::attention_block(const Layer& L, std::span<const DraftRow> rows, Workspace& ws,
                              const Linear& linear) const {
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t pairs = L.rope.rotated_pairs();
  const int donor = L.geometry.type == LayerType::Sliding ? sliding_donor_ : full_donor_;
  ensure(ws.cos, std::max<int64_t>(n * pairs, 1));
  ensure(ws.sin, std::max<int64_t>(n * pairs, 1));
  for (int64_t i = 0; i < n; ++i)
    rope_cos_sin(L.rope, ws.positions[static_cast<size_t>(i)], ws.cos.data() + i * pairs, ws.sin.data() + i * pairs);
  ws.attention_rows.clear();
  for (int64_t i = 0; i < n; ++i) {
    const TargetCache& cache = *rows[static_cast<size_t>(i)].cache;
    ws.attention_rows.push_back(AttentionRows{&cache.for_layer(donor), nullptr, i, 1, cache.offset() - 1});
  }
  AttentionWeights w;
  w.input_norm = L.input_layernorm.data();
  w.q_proj = &L.q_proj;
  w.q_norm = L.q_norm.data();
  w.o_proj = &L.o_proj;
  w.post_norm = L.post_attention_layernorm.data();
  w.rope = &L.rope;
  w.head_dim = L.geometry.head_dim;
  w.heads = L.q_proj.rows / w.head_dim;
  w.scale = L.scale;
  w.eps = eps_;
  specula::attention_block(w, ws.attention_rows, n, ws.cos.data(), ws.sin.data(), ws.x.data(), hidden_, ws.attention,
                           linear);
}

// x = (x + norm(mlp(norm(x)))) * layer_scalar.
void Drafter::mlp_block(const Layer& L, int64_t n, Workspace& ws, const Linear& linear) const {
  const int64_t h = hidden_;
  float* x = ws.x.data();
  ensure(ws.normed, n * h);
  ensure(ws.branch, n * h);
  rms_norm_rows(linear.pool, x, n, h, L.pre_feedforward_layernorm.data(), eps_, ws.normed.data());
  geglu_mlp(ws.normed.data(), n, L.gate_proj, L.up_proj, L.down_proj, std::nullopt, ws.gate, ws.up, ws.branch.data(),
            linear);
  add_normed_branch(linear.pool, x, ws.branch.data(), n, h, L.post_feedforward_layernorm.data(), eps_);
  if (L.layer_scalar != 1.0f)
    for (int64_t i = 0; i < n * h; ++i) x[i] *= L.layer_scalar;
}

void Drafter::head(int64_t n, std::vector<DraftStep>& out, const Linear& linear) const {
  Workspace& ws = *ws_;
  const float* x = ws.x.data();
  if (!candidate_head()) {
    // Dense tied head: one logit per vocabulary id, every row's in one pass over the table.
    ensure(ws.dense_scores, n * vocab_);
    linear(x, n, embed_tokens_, ws.dense_scores.data());
    for (int64_t r = 0; r < n; ++r) {
      DraftStep& o = out[static_cast<size_t>(r)];
      const float* scores = ws.dense_scores.data() + r * vocab_;
      o.candidate_scores.assign(scores, scores + vocab_);
      o.candidate_ids.resize(static_cast<size_t>(vocab_));
      for (int64_t i = 0; i < vocab_; ++i) o.candidate_ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
      o.token = static_cast<int32_t>(argmax(scores, vocab_));
    }
    return;
  }
  // Centroid head: score the clusters, keep the best top_clusters_, score their tokens only.
  ensure(ws.centroid_scores, n * clusters_);
  linear(x, n, centroids_, ws.centroid_scores.data());
  for (int64_t r = 0; r < n; ++r)
    centroid_candidates(x + r * hidden_, ws.centroid_scores.data() + r * clusters_, out[static_cast<size_t>(r)],
                        linear);
}

// One row's candidates: the tokens of its best clusters, scored against their embedding rows.
void Drafter::centroid_candidates(const float* x, const float* cluster_scores, DraftStep& out,
                                  const Linear& linear) const {
  Workspace& ws = *ws_;
  ws.top.resize(static_cast<size_t>(top_clusters_));
  top_k(cluster_scores, clusters_, top_clusters_, ws.top.data());
  const int64_t n = top_clusters_ * cluster_size_;
  out.candidate_ids.resize(static_cast<size_t>(n));
  for (int64_t c = 0; c < top_clusters_; ++c)
    std::memcpy(out.candidate_ids.data() + c * cluster_size_,
                token_ordering_.data() + ws.top[static_cast<size_t>(c)] * cluster_size_,
                sizeof(int32_t) * static_cast<size_t>(cluster_size_));
  // A built head's table is in cluster order: its candidates are runs of rows, and where the
  // table is packed, runs of packed blocks, copied as they are.
  const int32_t* table_rows = out.candidate_ids.data();
  if (built_head()) {
    if (embed_tokens_.packed != nullptr && is_low_precision(linear.precision_for(embed_tokens_)) &&
        cluster_size_ % kPackedRows == 0) {
      out.candidate_scores.resize(static_cast<size_t>(n));
      linear(x, 1, packed_cluster_rows(ws), out.candidate_scores.data());
      out.token = best_candidate(out);
      return;
    }
    ws.table_rows.resize(static_cast<size_t>(n));
    for (int64_t c = 0; c < top_clusters_; ++c)
      for (int64_t j = 0; j < cluster_size_; ++j)
        ws.table_rows[static_cast<size_t>(c * cluster_size_ + j)] =
            static_cast<int32_t>(ws.top[static_cast<size_t>(c)] * cluster_size_ + j);
    table_rows = ws.table_rows.data();
  }
  WeightMatrix rows;
  // The candidate rows in their stored format when a kernel takes them so: the fast kernel scores
  // quantized rows, and the exact kernels treat dense rows (bf16, f16, f32) alike, widening each
  // weight to f32 exactly, so a dense table skips the f32 copy (twice the bytes) for the same
  // scores. Quantized rows in exact precision are dequantized to f32 as before.
  if (embed_tokens_.format != WeightFormat::Affine ||
      (is_low_precision(linear.precision_for(embed_tokens_)) && fast_matmul_supported(embed_tokens_))) {
    rows = gather_stored_rows(embed_tokens_, table_rows, n, ws.raw_rows, ws.raw_scales, ws.raw_biases, linear.pool);
  } else {
    ensure(ws.gathered, n * hidden_);
    gather_rows(embed_tokens_, table_rows, n, ws.gathered.data());
    rows.format = WeightFormat::F32;
    rows.rows = n;
    rows.cols = hidden_;
    rows.data = ws.gathered.data();
  }
  out.candidate_scores.resize(static_cast<size_t>(n));
  linear(x, 1, rows, out.candidate_scores.data());
  out.token = best_candidate(out);
}

// The chosen clusters' packed blocks, in the order of ws.top, as one packed matrix. Its `data`
// still points at the whole table (the kernels read `packed`, laid out for this kernel set).
WeightMatrix Drafter::packed_cluster_rows(Workspace& ws) const {
  const auto run = static_cast<size_t>(packed_block_bytes(embed_tokens_) * (cluster_size_ / kPackedRows));
  ws.packed_rows.resize(run * static_cast<size_t>(top_clusters_));
  for (int64_t c = 0; c < top_clusters_; ++c)
    std::memcpy(ws.packed_rows.data() + static_cast<size_t>(c) * run,
                embed_tokens_.packed + static_cast<size_t>(ws.top[static_cast<size_t>(c)]) * run, run);
  WeightMatrix rows = embed_tokens_;
  rows.rows = top_clusters_ * cluster_size_;
  rows.packed = ws.packed_rows.data();
  if (rows.packed_bits != packed_code_bits(rows))
    fail("drafter: the candidate table was packed in {}-bit codes, the kernels read {}", rows.packed_bits,
         packed_code_bits(rows));
  return rows;
}

// Best score, lowest vocabulary id among equal maxima (= argmax of the scattered logits).
int32_t Drafter::best_candidate(const DraftStep& out) {
  const auto n = static_cast<int64_t>(out.candidate_ids.size());
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    const float s = out.candidate_scores[static_cast<size_t>(i)];
    if (std::isnan(s)) continue;
    if (best < 0 || s > out.candidate_scores[static_cast<size_t>(best)] ||
        (s == out.candidate_scores[static_cast<size_t>(best)] &&
         out.candidate_ids[static_cast<size_t>(i)] < out.candidate_ids[static_cast<size_t>(best)]))
      best = i;
  }
  return best < 0 ? *std::min_element(out.candidate_ids.begin(), out.candidate_ids.end())
                  : out.candidate_ids[static_cast<size_t>(best)];
}

}  // namespace specula
