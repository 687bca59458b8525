// The blocks of one target forward step (docs/gemma4.md §5.2-5.3): embedding with the per-layer inputs, then
// per layer attention, the dense or MoE feed-forward, the per-layer input gate and the layer
// scalar. Every block runs over all rows of the step, whatever sequences they belong to; only
// attention (and the KV writes before it) goes sequence by sequence.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "specula/kernels/activation.h"
#include "specula/kernels/attention.h"
#include "specula/kernels/matmul.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/rms_norm.h"
#include "specula/kernels/rope.h"
#include "specula/kernels/softmax.h"
#include "specula/model/forward_workspace.h"
#include "specula/model/layer_ops.h"

namespace specula {

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

// docs/gemma4.md §5.3: x += norm(o_proj(attention(rope(norm(q)), cache))), writing this step's K/V
// (k_norm + RoPE, scale-free v_norm) to the layer's cache first when the layer owns one.
void TargetModel::attention_block(int64_t li, const ForwardStep& step, ForwardWorkspace& ws, ThreadPool& pool) const {
  const TargetLayerWeights& L = weights_.layers[static_cast<size_t>(li)];
  static const FusedProjections kNotFused;
  const FusedProjections& F = fused_.empty() ? kNotFused : fused_[static_cast<size_t>(li)];
  const TextConfig& T = config().text;
  const LayerGeometry& g = L.geometry;
  const int64_t n = step.rows();
  const int64_t H = weights_.hidden_size;
  const int64_t D = g.head_dim;
  const int64_t nH = T.num_attention_heads;
  const int64_t nKV = g.num_kv_heads;
  const int64_t qw = nH * D;
  const int64_t kvw = nKV * D;
  const float eps = static_cast<float>(T.rms_norm_eps);
  const Precision precision = options_.precision;
  const Linear linear{pool, precision};

  // RoPE tables for the step's positions, once per layer type.
  const int type = g.type == LayerType::Sliding ? 0 : 1;
  const int64_t pairs = L.rope.rotated_pairs();
  if (!ws.rope_ready[type]) {
    ensure(ws.rope_cos[type], n * pairs);
    ensure(ws.rope_sin[type], n * pairs);
    for (int64_t r = 0; r < n; ++r)
      rope_cos_sin(L.rope, step.positions[static_cast<size_t>(r)], ws.rope_cos[type].data() + r * pairs,
                   ws.rope_sin[type].data() + r * pairs);
    ws.rope_ready[type] = true;
  }
  const float* rc = ws.rope_cos[type].data();
  const float* rs = ws.rope_sin[type].data();

  float* x = ws.x.data();
  ensure(ws.normed, n * H);
  float* normed = ws.normed.data();
  rms_norm_rows(pool, x, n, H, L.input_layernorm.data(), eps, normed);
  ensure(ws.q, n * qw);
  float* q = ws.q.data();
  // Layer ownership is the same for every sequence's cache (one config).
  const bool owns_kv = step.sequences.front().cache->owns(static_cast<int>(li));
  const bool fused_qkv = owns_kv && is_low_precision(precision) && F.qkv && fast_matmul_supported(*F.qkv);
  if (fused_qkv) {
    // One matmul for q, k (and v); row r of its output: [q | k | v].
    const int64_t width = F.qkv->rows;
    ensure(ws.qkv, n * width);
    ensure(ws.k, n * kvw);
    ensure(ws.v, n * kvw);
    linear(normed, n, *F.qkv, ws.qkv.data());
    for (int64_t r = 0; r < n; ++r) {
      const float* row = ws.qkv.data() + r * width;
      std::memcpy(q + r * qw, row, sizeof(float) * qw);
      std::memcpy(ws.k.data() + r * kvw, row + qw, sizeof(float) * kvw);
      if (!g.k_eq_v) std::memcpy(ws.v.data() + r * kvw, row + qw + kvw, sizeof(float) * kvw);
    }
  } else {
    linear(normed, n, L.q_proj, q);
  }
  norm_and_rotate_heads(pool, q, n, nH, D, L.q_norm.data(), eps, L.rope, rc, rs);

  if (owns_kv) {
    ensure(ws.k, n * kvw);
    ensure(ws.v, n * kvw);
    float* k = ws.k.data();
    float* v = ws.v.data();
    if (!fused_qkv) linear(normed, n, *L.k_proj, k);
    if (g.k_eq_v) {
      std::memcpy(v, k, sizeof(float) * n * kvw);  // V = the raw k_proj output, before k_norm
    } else if (!fused_qkv) {
      linear(normed, n, *L.v_proj, v);
    }
    norm_and_rotate_heads(pool, k, n, nKV, D, L.k_norm.data(), eps, L.rope, rc, rs);
    rms_norm_rows(pool, v, n * nKV, D, nullptr, eps, v);  // scale-free v_norm, never rotated
    for (const ForwardStep::Sequence& s : step.sequences) {
      KvCache& kv = s.cache->for_layer(static_cast<int>(li));
      kv.reserve_write(s.rows);
      for (int64_t r = 0; r < s.rows; ++r) {
        const int64_t row = s.first_row + r;
        std::memcpy(kv.k_slot(s.position + r), k + row * kvw, sizeof(float) * kvw);
        std::memcpy(kv.v_slot(s.position + r), v + row * kvw, sizeof(float) * kvw);
      }
    }
  }

  AttentionParams ap;
  ap.heads = nH;
  ap.scale = 1.0f;
  ap.window = g.type == LayerType::Sliding ? T.sliding_window : 0;
  ensure(ws.attn, n * qw);
  for (const ForwardStep::Sequence& s : step.sequences) {
    const KvCache& kv = s.cache->for_layer(static_cast<int>(li));
    attention(q + s.first_row * qw, s.rows, qw, s.position, kv.view(), ap, ws.attn.data() + s.first_row * qw, qw, pool);
  }
  ensure(ws.branch, n * H);
  float* br = ws.branch.data();
  linear(ws.attn.data(), n, L.o_proj, br);
  add_normed_branch(pool, x, br, n, H, L.post_attention_layernorm.data(), eps);
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
