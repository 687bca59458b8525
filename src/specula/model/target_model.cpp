#include "specula/model/target_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "specula/kernels/activation.h"
#include "specula/kernels/attention.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/rms_norm.h"
#include "specula/kernels/softmax.h"
#include "specula/model/fused_matrices.h"
#include "specula/model/logits_check.h"
#include "specula/util/error.h"

namespace specula {

// Scratch buffers reused across the chunks of one forward() call.
struct TargetModel::Workspace {
  std::vector<float> x;           // residual stream [n][H]
  std::vector<float> normed;      // [n][H]
  std::vector<float> q, k, v;     // projections
  std::vector<float> qkv;         // [n][q | k | v] of a fused projection
  std::vector<float> attn;        // [n][nH*D]
  std::vector<float> branch;      // [n][H] block outputs
  std::vector<float> branch2;     // [n][H]
  std::vector<float> gate, up;    // MLP intermediates
  std::vector<float> ple;         // per-layer inputs [n][NL*W]
  std::vector<float> ple_tok;     // [n][NL*W]
  std::vector<float> rope_cos[2], rope_sin[2];  // per layer type [n][pairs]
  bool rope_ready[2] = {false, false};
  // MoE
  std::vector<float> router_in, router_scores, expert_in, expert_out, moe_out, route_weights;
  std::vector<int64_t> route_experts;
  std::vector<int64_t> expert_rows;
};

namespace {

void ensure(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// Row-wise work (norms, GeGLU) on every thread of the pool when there is enough of it (a prefill
// chunk); less (a decode step's norms) runs on the calling thread, where a hand-off would cost more
// than the work. Rows are independent, so the bytes do not depend on the split.
constexpr int64_t kParallelElements = 65536;

// (A template, so the decode path's calls run fn directly, with no std::function to build.)
template <typename Fn>
void for_rows(ThreadPool& pool, int64_t rows, int64_t row_elements, Fn&& fn) {
  if (rows < 2 || rows * row_elements < kParallelElements || pool.size() == 1) return fn(0, rows);
  pool.parallel_for(rows, 1, [&](int, int64_t begin, int64_t end) { fn(begin, end); });
}

// rms_norm over contiguous rows of `dim` (in place when y == x), split by rows as above.
void rms_norm_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
                   float* y) {
  for_rows(pool, rows, dim, [&](int64_t r0, int64_t r1) {
    rms_norm(x + r0 * dim, r1 - r0, dim, dim, weight, eps, y + r0 * dim, dim);
  });
}

// down(gelu(gate(in)) * up(in)) for n rows -> out [n][down.rows]. `gate_up`: gate and up as one
// packed matrix (model/fused_matrices.h), used when the fast kernels run it.
void geglu_mlp(const float* in, int64_t n, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
               const std::optional<WeightMatrix>& gate_up, std::vector<float>& g, std::vector<float>& u, float* out,
               ThreadPool& pool, Precision precision) {
  const int64_t width = gate.rows;
  ensure(g, n * width);
  if (is_low_precision(precision) && gate_up && fast_matmul_supported(*gate_up)) {
    ensure(u, n * 2 * width);
    matmul(in, n, *gate_up, u.data(), pool, precision);  // row r: [gate | up]
    for_rows(pool, n, width, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        gelu_tanh_mul(u.data() + r * 2 * width, u.data() + r * 2 * width + width, g.data() + r * width, width);
    });
  } else {
    ensure(u, n * width);
    matmul(in, n, gate, g.data(), pool, precision);
    matmul(in, n, up, u.data(), pool, precision);
    for_rows(pool, n, width, [&](int64_t r0, int64_t r1) {
      gelu_tanh_mul(g.data() + r0 * width, u.data() + r0 * width, g.data() + r0 * width, (r1 - r0) * width);
    });
  }
  matmul(g.data(), n, down, out, pool, precision);
}

}  // namespace

std::unique_ptr<TargetModel> TargetModel::load(const std::string& dir, const TargetOptions& options) {
  auto ck = std::make_unique<TargetCheckpoint>(load_target(dir));
  return std::make_unique<TargetModel>(std::move(ck), options);
}

TargetModel::TargetModel(std::unique_ptr<TargetCheckpoint> checkpoint, const TargetOptions& options)
    : checkpoint_(std::move(checkpoint)), options_(options) {
  if (options_.prefill_chunk < 1) fail("prefill chunk {} must be >= 1", options_.prefill_chunk);
  if (options_.rollback_reserve < 0) fail("rollback reserve {} must be >= 0", options_.rollback_reserve);
  if (options_.max_context < 0) fail("context limit {} must be >= 0", options_.max_context);
  weights_ = make_target_weights(*checkpoint_);
  const TextConfig& t = checkpoint_->config.text;
  max_context_ = t.max_position_embeddings;
  if (options_.max_context > 0) max_context_ = std::min(max_context_, options_.max_context);
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
    if (packable(*w) && fast_matmul_supported(*w)) fast.push_back(w);
  }
  const TensorStore& store = checkpoint_->store;
  PackedCacheOptions cache;
  cache.dir = options_.packed_cache_dir;
  cache.min_bytes = options_.packed_cache_min_bytes;
  packed_ = load_packed_weights(store, fast, cache, ThreadPool::global(), [&store](const WeightMatrix& w) {
    const auto groups = static_cast<size_t>(w.rows * w.groups_per_row()) * dtype_size(w.scale_dtype);
    store.release_pages(w.data, static_cast<size_t>(w.rows * w.row_bytes()));
    store.release_pages(w.scales, groups);
    store.release_pages(w.biases, groups);
  });
}

std::vector<int32_t> TargetModel::eos_token_ids() const {
  std::vector<int32_t> ids(config().eos_token_ids.begin(), config().eos_token_ids.end());
  if (checkpoint_->generation) {
    for (int id : checkpoint_->generation->eos_token_ids) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

TargetCache TargetModel::new_cache() const {
  CacheOptions o;
  o.rollback_reserve = options_.rollback_reserve;
  o.max_chunk = options_.prefill_chunk;
  return TargetCache(config(), o);
}

ForwardOutput TargetModel::forward(TargetCache& cache, std::span<const int32_t> tokens, const ForwardRequest& request,
                                   ThreadPool& pool) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t vocab = weights_.vocab_size;
  const int64_t H = weights_.hidden_size;
  if (n == 0) fail("forward: no tokens to feed");
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab)
      fail("token id {} at index {} is outside the vocabulary [0, {})", tokens[i], i, vocab);
  }
  if (cache.offset() + n > max_context_)
    fail("context of {} tokens ({} cached + {} new) exceeds the limit of {} ({})", cache.offset() + n,
         cache.offset(), n, max_context_,
         max_context_ == config().text.max_position_embeddings ? "max_position_embeddings" : "configured limit");
  const int64_t chunk = request.chunk > 0 ? request.chunk : cache.options().max_chunk;
  if (chunk > cache.options().max_chunk)
    fail("forward chunk of {} rows exceeds the cache's maximum chunk of {}", chunk, cache.options().max_chunk);

  ForwardOutput out;
  out.vocab_size = vocab;
  out.hidden_size = H;
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
  const size_t m_total = out.rows.size();
  if (request.logits) out.logits.resize(m_total * static_cast<size_t>(vocab));
  if (request.hidden) out.hidden.resize(m_total * static_cast<size_t>(H));

  const int64_t first_position = cache.offset();  // context position of fed row 0
  Workspace ws;
  std::vector<float> hid;
  size_t next = 0;  // next entry of out.rows to produce
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t cn = std::min(chunk, n - c0);
    forward_chunk(cache, tokens.data() + c0, cn, ws, pool);
    // Rows of this chunk that were asked for: final norm, then the LM head over just those rows.
    const size_t first = next;
    while (next < m_total && out.rows[next] < c0 + cn) ++next;
    const int64_t m = static_cast<int64_t>(next - first);
    if (m == 0) continue;
    ensure(hid, m * H);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t r = out.rows[first + static_cast<size_t>(i)] - c0;
      rms_norm(ws.x.data() + r * H, 1, H, H, weights_.final_norm.data(), static_cast<float>(config().text.rms_norm_eps),
               hid.data() + i * H, H);
    }
    if (request.hidden) std::memcpy(out.hidden.data() + first * H, hid.data(), sizeof(float) * m * H);
    if (request.logits) {
      float* lg = out.logits.data() + first * vocab;
      matmul(hid.data(), m, weights_.lm_head, lg, pool, options_.precision);
      if (config().text.final_logit_softcapping) {
        // tanh over every vocabulary entry of every row costs ~5 ms per 262k-wide row: all threads
        // (elementwise, so the bytes do not depend on the split).
        const auto cap = static_cast<float>(*config().text.final_logit_softcapping);
        pool.parallel_for(m * vocab, 4096, [&](int, int64_t b, int64_t e) { softcap_inplace(lg + b, e - b, cap); });
      }
      for (int64_t i = 0; i < m; ++i)
        require_finite_logits(lg + i * vocab, vocab, first_position + out.rows[first + static_cast<size_t>(i)],
                              checkpoint_->dir);
    }
  }
  return out;
}

void TargetModel::forward_chunk(TargetCache& cache, const int32_t* tok, int64_t n, Workspace& ws,
                                ThreadPool& pool) const {
  const TargetWeights& W = weights_;
  const TextConfig& T = config().text;
  const int64_t H = W.hidden_size;
  const int64_t NL = static_cast<int64_t>(W.layers.size());
  const int64_t pos0 = cache.offset();
  const float eps = static_cast<float>(T.rms_norm_eps);
  ws.rope_ready[0] = ws.rope_ready[1] = false;

  // Embedding (SPEC §5.2): the scale is the bf16-rounded sqrt(H).
  ensure(ws.x, n * H);
  float* x = ws.x.data();
  gather_rows(W.embed_tokens, tok, n, x);
  for (int64_t i = 0; i < n * H; ++i) x[i] *= W.embed_scale;

  // Per-layer inputs: (RMSNorm(proj(h) * H^-0.5) + embed_pl(ids) * sqrt(W)) * 2^-0.5.
  if (W.ple_width > 0) {
    const int64_t P = W.ple_width;
    const int64_t PW = P * NL;
    ensure(ws.ple, n * PW);
    ensure(ws.ple_tok, n * PW);
    std::vector<int32_t> ids(tok, tok + n);
    for (auto& id : ids) {
      if (id >= W.ple_vocab) id = 0;  // HF maps ids past the per-layer vocabulary to pad (0)
    }
    gather_rows(W.embed_tokens_per_layer, ids.data(), n, ws.ple_tok.data());
    matmul(x, n, W.per_layer_model_projection, ws.ple.data(), pool, options_.precision);
    const float proj_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
    const float tok_scale = static_cast<float>(std::sqrt(static_cast<double>(P)));
    const float combine = static_cast<float>(1.0 / std::sqrt(2.0));
    float* ple = ws.ple.data();
    for (int64_t i = 0; i < n * PW; ++i) ple[i] *= proj_scale;
    rms_norm_rows(pool, ple, n * NL, P, W.per_layer_projection_norm.data(), eps, ple);
    for (int64_t i = 0; i < n * PW; ++i) ple[i] = (ple[i] + ws.ple_tok[i] * tok_scale) * combine;
  }

  for (int64_t li = 0; li < NL; ++li) {
    const TargetLayerWeights& L = W.layers[static_cast<size_t>(li)];
    static const FusedProjections kNotFused;
    const FusedProjections& F = fused_.empty() ? kNotFused : fused_[static_cast<size_t>(li)];
    const LayerGeometry& g = L.geometry;
    const int64_t D = g.head_dim;
    const int64_t nH = T.num_attention_heads;
    const int64_t nKV = g.num_kv_heads;
    const int64_t qw = nH * D;
    const int64_t kvw = nKV * D;
    const int type = g.type == LayerType::Sliding ? 0 : 1;

    // RoPE tables for this chunk's positions, once per layer type.
    const int64_t pairs = L.rope.rotated_pairs();
    if (!ws.rope_ready[type]) {
      ensure(ws.rope_cos[type], n * pairs);
      ensure(ws.rope_sin[type], n * pairs);
      for (int64_t r = 0; r < n; ++r)
        rope_cos_sin(L.rope, pos0 + r, ws.rope_cos[type].data() + r * pairs, ws.rope_sin[type].data() + r * pairs);
      ws.rope_ready[type] = true;
    }
    const float* rc = ws.rope_cos[type].data();
    const float* rs = ws.rope_sin[type].data();

    // ---- attention block (SPEC §5.3 (1)) ----
    ensure(ws.normed, n * H);
    float* normed = ws.normed.data();
    rms_norm_rows(pool, x, n, H, L.input_layernorm.data(), eps, normed);
    ensure(ws.q, n * qw);
    float* q = ws.q.data();
    const bool owns_kv = cache.owns(static_cast<int>(li));
    const bool fused_qkv = owns_kv && is_low_precision(options_.precision) && F.qkv && fast_matmul_supported(*F.qkv);
    if (fused_qkv) {
      // One matmul for q, k (and v); row r of its output: [q | k | v].
      const int64_t width = F.qkv->rows;
      ensure(ws.qkv, n * width);
      ensure(ws.k, n * kvw);
      ensure(ws.v, n * kvw);
      matmul(normed, n, *F.qkv, ws.qkv.data(), pool, options_.precision);
      for (int64_t r = 0; r < n; ++r) {
        const float* row = ws.qkv.data() + r * width;
        std::memcpy(q + r * qw, row, sizeof(float) * qw);
        std::memcpy(ws.k.data() + r * kvw, row + qw, sizeof(float) * kvw);
        if (!g.k_eq_v) std::memcpy(ws.v.data() + r * kvw, row + qw + kvw, sizeof(float) * kvw);
      }
    } else {
      matmul(normed, n, L.q_proj, q, pool, options_.precision);
    }
    rms_norm_rows(pool, q, n * nH, D, L.q_norm.data(), eps, q);
    for (int64_t r = 0; r < n; ++r) rope_apply(q + r * qw, nH, L.rope, rc + r * pairs, rs + r * pairs);

    KvCache& kv = cache.for_layer(static_cast<int>(li));
    if (owns_kv) {
      kv.reserve_write(n);
      ensure(ws.k, n * kvw);
      ensure(ws.v, n * kvw);
      float* k = ws.k.data();
      float* v = ws.v.data();
      if (!fused_qkv) matmul(normed, n, *L.k_proj, k, pool, options_.precision);
      if (g.k_eq_v) {
        std::memcpy(v, k, sizeof(float) * n * kvw);  // V = the raw k_proj output, before k_norm
      } else if (!fused_qkv) {
        matmul(normed, n, *L.v_proj, v, pool, options_.precision);
      }
      rms_norm_rows(pool, k, n * nKV, D, L.k_norm.data(), eps, k);
      for (int64_t r = 0; r < n; ++r) rope_apply(k + r * kvw, nKV, L.rope, rc + r * pairs, rs + r * pairs);
      rms_norm_rows(pool, v, n * nKV, D, nullptr, eps, v);  // scale-free v_norm, never rotated
      for (int64_t r = 0; r < n; ++r) {
        std::memcpy(kv.k_slot(pos0 + r), k + r * kvw, sizeof(float) * kvw);
        std::memcpy(kv.v_slot(pos0 + r), v + r * kvw, sizeof(float) * kvw);
      }
    }
    AttentionParams ap;
    ap.heads = nH;
    ap.scale = 1.0f;
    ap.window = g.type == LayerType::Sliding ? T.sliding_window : 0;
    ensure(ws.attn, n * qw);
    attention(q, n, qw, pos0, kv.view(), ap, ws.attn.data(), qw, pool);
    ensure(ws.branch, n * H);
    float* br = ws.branch.data();
    matmul(ws.attn.data(), n, L.o_proj, br, pool, options_.precision);
    rms_norm_rows(pool, br, n, H, L.post_attention_layernorm.data(), eps, br);
    add_inplace(x, br, n * H);

    // ---- feed-forward block ----
    if (!L.moe) {
      rms_norm_rows(pool, x, n, H, L.pre_feedforward_layernorm.data(), eps, normed);
      geglu_mlp(normed, n, L.gate_proj, L.up_proj, L.down_proj, F.gate_up, ws.gate, ws.up, br, pool,
                options_.precision);
      rms_norm_rows(pool, br, n, H, L.post_feedforward_layernorm.data(), eps, br);
      add_inplace(x, br, n * H);
    } else {
      // Dense branch.
      rms_norm_rows(pool, x, n, H, L.pre_feedforward_layernorm.data(), eps, normed);
      geglu_mlp(normed, n, L.gate_proj, L.up_proj, L.down_proj, F.gate_up, ws.gate, ws.up, br, pool,
                options_.precision);
      rms_norm_rows(pool, br, n, H, L.post_feedforward_layernorm_1.data(), eps, br);
      // Router (HF): RMSNorm(r) * scale * H^-0.5 -> proj -> softmax over the top-k -> * per_expert_scale.
      const int64_t E = static_cast<int64_t>(L.expert_gate.size());
      const int64_t K = T.top_k_experts;
      const float root = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
      ensure(ws.router_in, n * H);
      rms_norm_rows(pool, x, n, H, nullptr, eps, ws.router_in.data());
      for (int64_t r = 0; r < n; ++r) {
        float* z = ws.router_in.data() + r * H;
        for (int64_t j = 0; j < H; ++j) z[j] = z[j] * L.router_scale[j] * root;
      }
      ensure(ws.router_scores, n * E);
      matmul(ws.router_in.data(), n, L.router_proj, ws.router_scores.data(), pool, options_.precision);
      ws.route_experts.resize(static_cast<size_t>(n * K));
      ensure(ws.route_weights, n * K);
      for (int64_t r = 0; r < n; ++r) {
        const float* s = ws.router_scores.data() + r * E;
        int64_t* idx = ws.route_experts.data() + r * K;
        float* w = ws.route_weights.data() + r * K;
        top_k(s, E, K, idx);
        for (int64_t k = 0; k < K; ++k) w[k] = s[idx[k]];
        softmax_inplace(w, K);
        for (int64_t k = 0; k < K; ++k) w[k] *= L.router_per_expert_scale[static_cast<size_t>(idx[k])];
      }
      // Experts on RMSNorm(r, pre_feedforward_layernorm_2); rows grouped per expert (the matmul is
      // batch invariant, so grouping does not change any row's bytes).
      rms_norm_rows(pool, x, n, H, L.pre_feedforward_layernorm_2.data(), eps, normed);
      ensure(ws.moe_out, n * K * H);  // [row][k][H]
      for (int64_t e = 0; e < E; ++e) {
        ws.expert_rows.clear();
        for (int64_t i = 0; i < n * K; ++i)
          if (ws.route_experts[static_cast<size_t>(i)] == e) ws.expert_rows.push_back(i);
        const int64_t m = static_cast<int64_t>(ws.expert_rows.size());
        if (m == 0) continue;
        ensure(ws.expert_in, m * H);
        ensure(ws.expert_out, m * H);
        for (int64_t j = 0; j < m; ++j)
          std::memcpy(ws.expert_in.data() + j * H, normed + (ws.expert_rows[j] / K) * H, sizeof(float) * H);
        geglu_mlp(ws.expert_in.data(), m, L.expert_gate[e], L.expert_up[e], L.expert_down[e], std::nullopt, ws.gate,
                  ws.up, ws.expert_out.data(), pool, options_.precision);
        for (int64_t j = 0; j < m; ++j)
          std::memcpy(ws.moe_out.data() + ws.expert_rows[j] * H, ws.expert_out.data() + j * H, sizeof(float) * H);
      }
      ensure(ws.branch2, n * H);
      float* f2 = ws.branch2.data();
      for (int64_t r = 0; r < n; ++r) {
        float* dst = f2 + r * H;
        std::fill(dst, dst + H, 0.0f);
        for (int64_t k = 0; k < K; ++k) {
          const float w = ws.route_weights[r * K + k];
          const float* src = ws.moe_out.data() + (r * K + k) * H;
          for (int64_t j = 0; j < H; ++j) dst[j] += w * src[j];
        }
      }
      rms_norm_rows(pool, f2, n, H, L.post_feedforward_layernorm_2.data(), eps, f2);
      add_inplace(br, f2, n * H);
      rms_norm_rows(pool, br, n, H, L.post_feedforward_layernorm.data(), eps, br);
      add_inplace(x, br, n * H);
    }

    // ---- per-layer input gate (SPEC §5.3 (3)) ----
    if (L.ple) {
      const int64_t P = W.ple_width;
      ensure(ws.gate, n * P);
      float* gt = ws.gate.data();
      matmul(x, n, L.per_layer_input_gate, gt, pool, options_.precision);
      gelu_tanh_inplace(gt, n * P);
      for (int64_t r = 0; r < n; ++r) {
        const float* pli = ws.ple.data() + r * P * NL + li * P;
        for (int64_t j = 0; j < P; ++j) gt[r * P + j] *= pli[j];
      }
      matmul(gt, n, L.per_layer_projection, br, pool, options_.precision);
      rms_norm_rows(pool, br, n, H, L.post_per_layer_input_norm.data(), eps, br);
      add_inplace(x, br, n * H);
    }

    // ---- layer scalar on the whole residual stream ----
    if (L.layer_scalar != 1.0f) {
      for (int64_t i = 0; i < n * H; ++i) x[i] *= L.layer_scalar;
    }
  }
  cache.advance(n);
}

}  // namespace specula
