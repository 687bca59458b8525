// The blocks of one target forward step (docs/gemma4.md §5.2-5.3): embedding with the per-layer inputs, then
// per layer attention, the dense or MoE feed-forward, the per-layer input gate and the layer
// scalar. Every block runs over all rows of the step, whatever sequences they belong to; only
// attention (and the KV writes before it) goes sequence by sequence.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "specula/kernels/activation.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/rms_norm.h"
#include "specula/kernels/rope.h"
#include "specula/kernels/softmax.h"
#include "specula/model/attention_block.h"
#include "specula/model/forward_workspace.h"
#include "specula/model/layer_ops.h"

namespace specula {

namespace {

// A target layer's attention weights; K/V projections only when it writes its own cache.
AttentionWeights attention_weights(const TargetLayerWeights& L, const TextConfig& T, bool owns_kv,
                                   const WeightMatrix* fused_qkv) {
  AttentionWeights w;
  w.input_norm = L.input_layernorm.data();
  w.q_proj = &L.q_proj;
  w.q_norm = L.q_norm.data();
  if (owns_kv) {
    w.k_proj = &*L.k_proj;
    w.v_proj = L.geometry.k_eq_v ? nullptr : &*L.v_proj;
    w.k_norm = L.k_norm.data();
    w.qkv = fused_qkv;
  }
  w.o_proj = &L.o_proj;
  w.post_norm = L.post_attention_layernorm.data();
  w.rope = &L.rope;
  w.heads = T.num_attention_heads;
  w.head_dim = L.geometry.head_dim;
  w.kv_heads = L.geometry.num_kv_heads;
  w.scale = 1.0f;
  w.eps = static_cast<float>(T.rms_norm_eps);
  return w;
}

}  // namespace

void TargetModel::run_step(const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const {
  ws.rope_ready[0] = ws.rope_ready[1] = false;
  embed(step, ws, pool);
  for (int64_t li = 0; li < static_cast<int64_t>(weights_.layers.size()); ++li) {
    const TargetLayerWeights& L = weights_.layers[static_cast<size_t>(li)];
    attention_block(li, step, ws, pool);
    if (L.moe) {
      moe_mlp_block(li, step, ws, pool);
    } else {
      dense_mlp_block(li, step, ws, pool);
    }
    if (L.ple) per_layer_input_block(li, step, ws, pool);
    if (L.layer_scalar != 1.0f) {  // on the whole residual stream
      float* x = ws.x.data();
      for (int64_t i = 0; i < step.rows() * weights_.hidden_size; ++i) x[i] *= L.layer_scalar;
    }
  }
  for (const ForwardStep::Sequence& s : step.sequences) s.cache->advance(s.rows);
}

// Embedding (docs/gemma4.md §5.2): the scale is the bf16-rounded sqrt(H). Per-layer inputs:
// (RMSNorm(proj(h) * H^-0.5) + embed_pl(ids) * sqrt(W)) * 2^-0.5.
void TargetModel::embed(const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const {
  const TargetWeights& W = weights_;
  const int64_t n = step.rows();
  const int64_t H = W.hidden_size;
  ensure(ws.x, n * H);
  float* x = ws.x.data();
  gather_rows(W.embed_tokens, step.tokens.data(), n, x);
  for (int64_t i = 0; i < n * H; ++i) x[i] *= W.embed_scale;
  if (W.ple_width == 0) return;

  const int64_t NL = static_cast<int64_t>(W.layers.size());
  const int64_t P = W.ple_width;
  const int64_t PW = P * NL;
  ensure(ws.ple, n * PW);
  ensure(ws.ple_tok, n * PW);
  ws.ple_ids.assign(step.tokens.begin(), step.tokens.end());
  for (auto& id : ws.ple_ids) {
    if (id >= W.ple_vocab) id = 0;  // HF maps ids past the per-layer vocabulary to pad (0)
  }
  gather_rows(W.embed_tokens_per_layer, ws.ple_ids.data(), n, ws.ple_tok.data());
  const Linear linear{pool, options_.precision};
  linear(x, n, W.per_layer_model_projection, ws.ple.data());
  const float eps = static_cast<float>(config().text.rms_norm_eps);
  const float proj_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
  const float tok_scale = static_cast<float>(std::sqrt(static_cast<double>(P)));
  const float combine = static_cast<float>(1.0 / std::sqrt(2.0));
  float* ple = ws.ple.data();
  for (int64_t i = 0; i < n * PW; ++i) ple[i] *= proj_scale;
  rms_norm_rows(pool, ple, n * NL, P, W.per_layer_projection_norm.data(), eps, ple);
  for (int64_t i = 0; i < n * PW; ++i) ple[i] = (ple[i] + ws.ple_tok[i] * tok_scale) * combine;
}

// docs/gemma4.md §5.3: the shared attention block (model/attention_block.h) over every sequence's
// cache of this layer; a layer that owns its cache writes this step's K/V there first.
void TargetModel::attention_block(int64_t li, const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const {
  const TargetLayerWeights& L = weights_.layers[static_cast<size_t>(li)];
  const int64_t n = step.rows();
  // Layer ownership is the same for every sequence's cache (one config).
  const bool owns_kv = step.sequences.front().cache->owns(static_cast<int>(li));
  const WeightMatrix* fused_qkv = nullptr;
  if (owns_kv && is_low_precision(options_.precision) && !fused_.empty()) {
    const std::optional<WeightMatrix>& qkv = fused_[static_cast<size_t>(li)].qkv;
    if (qkv && fast_matmul_supported(*qkv)) fused_qkv = &*qkv;
  }
  const AttentionWeights w = attention_weights(L, config().text, owns_kv, fused_qkv);

  // RoPE tables for the step's positions, once per layer type.
  const int type = L.geometry.type == LayerType::Sliding ? 0 : 1;
  const int64_t pairs = L.rope.rotated_pairs();
  if (!ws.rope_ready[type]) {
    ensure(ws.rope_cos[type], n * pairs);
    ensure(ws.rope_sin[type], n * pairs);
    for (int64_t r = 0; r < n; ++r)
      rope_cos_sin(L.rope, step.positions[static_cast<size_t>(r)], ws.rope_cos[type].data() + r * pairs,
                   ws.rope_sin[type].data() + r * pairs);
    ws.rope_ready[type] = true;
  }

  ws.attention_rows.clear();
  for (const ForwardStep::Sequence& s : step.sequences) {
    KvCache& kv = s.cache->for_layer(static_cast<int>(li));
    ws.attention_rows.push_back(AttentionRows{&kv, owns_kv ? &kv : nullptr, s.first_row, s.rows, s.position});
  }
  specula::attention_block(w, ws.attention_rows, n, ws.rope_cos[type].data(), ws.rope_sin[type].data(), ws.x.data(),
                           weights_.hidden_size, ws.attention, Linear{pool, options_.precision});
}

// branch = post_norm(mlp(pre_feedforward_layernorm(x))): the dense MLP of both feed-forward blocks.
void TargetModel::mlp_branch(int64_t li, const std::vector<float>& post_norm, const ForwardStep& step,
                             ForwardWorkspace& ws, ThreadPool& pool) const {
  const TargetLayerWeights& L = weights_.layers[static_cast<size_t>(li)];
  static const std::optional<WeightMatrix> kNotFused;
  const std::optional<WeightMatrix>& gate_up = fused_.empty() ? kNotFused : fused_[static_cast<size_t>(li)].gate_up;
  const int64_t n = step.rows();
  const int64_t H = weights_.hidden_size;
  const float eps = static_cast<float>(config().text.rms_norm_eps);
  ensure(ws.normed, n * H);
  ensure(ws.branch, n * H);
  float* br = ws.branch.data();
  rms_norm_rows(pool, ws.x.data(), n, H, L.pre_feedforward_layernorm.data(), eps, ws.normed.data());
  geglu_mlp(ws.normed.data(), n, L.gate_proj, L.up_proj, L.down_proj, gate_up, ws.gate, ws.up, br,
            Linear{pool, options_.precision});
  rms_norm_rows(pool, br, n, H, post_norm.data(), eps, br);
}

// x += norm(mlp(norm(x))).
void TargetModel::dense_mlp_block(int64_t li, const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const {
  mlp_branch(li, weights_.layers[static_cast<size_t>(li)].post_feedforward_layernorm, step, ws, pool);
  add_rows(ws.x.data(), ws.branch.data(), step.rows() * weights_.hidden_size);
}

// x += norm(norm1(mlp(norm(x))) + norm2(sum_k w_k expert_k(norm'(x)))): the dense branch beside
// the top-k routed experts (router: RMSNorm(x) * scale * H^-0.5 -> proj -> softmax over the top-k
// -> * per_expert_scale).
void TargetModel::moe_mlp_block(int64_t li, const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const {
  const TargetLayerWeights& L = weights_.layers[static_cast<size_t>(li)];
  const int64_t n = step.rows();
  const int64_t H = weights_.hidden_size;
  const float eps = static_cast<float>(config().text.rms_norm_eps);
  const Linear linear{pool, options_.precision};
  mlp_branch(li, L.post_feedforward_layernorm_1, step, ws, pool);  // the dense branch
  float* x = ws.x.data();
  float* normed = ws.normed.data();
  float* br = ws.branch.data();

  // Router.
  const int64_t E = static_cast<int64_t>(L.expert_gate.size());
  const int64_t K = config().text.top_k_experts;
  const float root = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
  ensure(ws.router_in, n * H);
  rms_norm_rows(pool, x, n, H, nullptr, eps, ws.router_in.data());
  for (int64_t r = 0; r < n; ++r) {
    float* z = ws.router_in.data() + r * H;
    for (int64_t j = 0; j < H; ++j) z[j] = z[j] * L.router_scale[j] * root;
  }
  ensure(ws.router_scores, n * E);
  linear(ws.router_in.data(), n, L.router_proj, ws.router_scores.data());
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

  // Experts on RMSNorm(x, pre_feedforward_layernorm_2); rows grouped per expert (the matmul is
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
    geglu_mlp(ws.expert_in.data(), m, L.expert_gate[e], L.expert_up[e], L.expert_down[e], std::nullopt, ws.gate, ws.up,
              ws.expert_out.data(), linear);
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
  add_rows(br, f2, n * H);
  add_normed_branch(pool, x, br, n, H, L.post_feedforward_layernorm.data(), eps);
}

// docs/gemma4.md §5.3 (per-layer input): x += norm(proj(gelu(gate(x)) * per_layer_input)).
void TargetModel::per_layer_input_block(int64_t li, const ForwardStep& step, ForwardWorkspace& ws,
                                        ThreadPool& pool) const {
  const TargetLayerWeights& L = weights_.layers[static_cast<size_t>(li)];
  const int64_t n = step.rows();
  const int64_t H = weights_.hidden_size;
  const int64_t P = weights_.ple_width;
  const int64_t NL = static_cast<int64_t>(weights_.layers.size());
  const float eps = static_cast<float>(config().text.rms_norm_eps);
  float* x = ws.x.data();
  float* br = ws.branch.data();
  ensure(ws.gate, n * P);
  float* gt = ws.gate.data();
  const Linear linear{pool, options_.precision};
  linear(x, n, L.per_layer_input_gate, gt);
  gelu_tanh_inplace(gt, n * P);
  for (int64_t r = 0; r < n; ++r) {
    const float* pli = ws.ple.data() + r * P * NL + li * P;
    for (int64_t j = 0; j < P; ++j) gt[r * P + j] *= pli[j];
  }
  linear(gt, n, L.per_layer_projection, br);
  add_normed_branch(pool, x, br, n, H, L.post_per_layer_input_norm.data(), eps);
}

}  // namespace specula
