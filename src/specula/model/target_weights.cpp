#include "specula/model/target_weights.h"

#include <cmath>
#include <cstring>

#include "specula/kernels/packed_affine.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

std::vector<float> tensor_to_f32(const TensorView& t) {
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  const std::byte* p = t.data;
  if (p == nullptr) fail("tensor {} has no data", t.name);
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::F32: {
        float v;
        std::memcpy(&v, p + i * 4, 4);
        out[i] = v;
        break;
      }
      case DType::BF16: {
        uint16_t v;
        std::memcpy(&v, p + i * 2, 2);
        out[i] = bf16_to_f32(v);
        break;
      }
      case DType::F16: {
        uint16_t v;
        std::memcpy(&v, p + i * 2, 2);
        out[i] = f16_to_f32(v);
        break;
      }
      default: fail("tensor {} has dtype {}, expected BF16, F16 or F32", t.name, dtype_name(t.dtype));
    }
  }
  return out;
}

namespace {

std::vector<float> vec(const TensorView* t, int64_t length, const char* what, int layer) {
  if (t == nullptr) fail("layer {}: missing tensor {}", layer, what);
  std::vector<float> v = tensor_to_f32(*t);
  if (static_cast<int64_t>(v.size()) != length)
    fail("tensor {} has {} elements, expected {}", t->name, v.size(), length);
  return v;
}

const ModuleRef& need(const std::optional<ModuleRef>& m, const char* what, int layer) {
  if (!m) fail("layer {}: missing module {}", layer, what);
  return *m;
}

RopeFrequencies rope_for(const LayerGeometry& g) {
  return make_rope_frequencies(g.rope.type, g.rope.theta, g.rope.partial_rotary_factor, g.rope.factor, g.head_dim,
                               layer_type_name(g.type));
}

}  // namespace

TargetWeights make_target_weights(const TargetCheckpoint& ck) {
  const TargetConfig& cfg = ck.config;
  const TextConfig& t = cfg.text;
  TargetWeights w;
  w.hidden_size = t.hidden_size;
  w.vocab_size = t.vocab_size;
  w.embed_tokens = weight_matrix(ck.embed_tokens);
  w.lm_head = ck.lm_head ? weight_matrix(*ck.lm_head) : w.embed_tokens;
  if (w.embed_tokens.rows != t.vocab_size || w.embed_tokens.cols != t.hidden_size)
    fail("{}: embed_tokens is [{}, {}], config says vocab_size {} and hidden_size {}", cfg.source, w.embed_tokens.rows,
         w.embed_tokens.cols, t.vocab_size, t.hidden_size);
  if (ck.final_norm == nullptr) fail("{}: missing the final norm weight", ck.dir);
  w.final_norm = vec(ck.final_norm, t.hidden_size, "norm.weight", -1);
  w.embed_scale = bf16_to_f32(f32_to_bf16(static_cast<float>(std::sqrt(static_cast<double>(t.hidden_size)))));

  if (t.hidden_size_per_layer_input > 0) {
    w.ple_width = t.hidden_size_per_layer_input;
    if (!ck.embed_tokens_per_layer || !ck.per_layer_model_projection || ck.per_layer_projection_norm == nullptr)
      fail("{}: hidden_size_per_layer_input is {} but the per-layer-input tensors are missing", cfg.source,
           w.ple_width);
    w.embed_tokens_per_layer = weight_matrix(*ck.embed_tokens_per_layer);
    w.ple_vocab = w.embed_tokens_per_layer.rows;
    w.per_layer_model_projection = weight_matrix(*ck.per_layer_model_projection);
    w.per_layer_projection_norm = vec(ck.per_layer_projection_norm, w.ple_width, "per_layer_projection_norm", -1);
    const int64_t total = w.ple_width * t.num_hidden_layers;
    if (w.embed_tokens_per_layer.cols != total || w.per_layer_model_projection.rows != total)
      fail("{}: per-layer-input tensors have width {} / {}, expected num_hidden_layers x {} = {}", cfg.source,
           w.embed_tokens_per_layer.cols, w.per_layer_model_projection.rows, w.ple_width, total);
  }

  if (ck.layers.size() != cfg.layers.size())
    fail("{}: {} layers of tensors for {} configured layers", cfg.source, ck.layers.size(), cfg.layers.size());
  for (size_t i = 0; i < ck.layers.size(); ++i) {
    const TargetLayerModules& m = ck.layers[i];
    const LayerGeometry& g = cfg.layers[i];
    const int li = static_cast<int>(i);
    TargetLayerWeights L;
    L.geometry = g;
    L.rope = rope_for(g);
    L.q_proj = weight_matrix(m.q_proj);
    L.o_proj = weight_matrix(m.o_proj);
    L.q_norm = vec(m.q_norm, g.head_dim, "self_attn.q_norm", li);
    if (g.kv_donor) {
      L.k_proj = weight_matrix(need(m.k_proj, "self_attn.k_proj", li));
      if (!g.k_eq_v) L.v_proj = weight_matrix(need(m.v_proj, "self_attn.v_proj", li));
      L.k_norm = vec(m.k_norm, g.head_dim, "self_attn.k_norm", li);
    }
    L.input_layernorm = vec(m.input_layernorm, t.hidden_size, "input_layernorm", li);
    L.post_attention_layernorm = vec(m.post_attention_layernorm, t.hidden_size, "post_attention_layernorm", li);
    L.pre_feedforward_layernorm = vec(m.pre_feedforward_layernorm, t.hidden_size, "pre_feedforward_layernorm", li);
    L.post_feedforward_layernorm = vec(m.post_feedforward_layernorm, t.hidden_size, "post_feedforward_layernorm", li);
    L.gate_proj = weight_matrix(m.gate_proj);
    L.up_proj = weight_matrix(m.up_proj);
    L.down_proj = weight_matrix(m.down_proj);
    if (m.layer_scalar != nullptr) L.layer_scalar = vec(m.layer_scalar, 1, "layer_scalar", li)[0];

    if (t.enable_moe_block) {
      L.moe = true;
      L.router_proj = weight_matrix(need(m.router_proj, "router.proj", li));
      L.router_scale = vec(m.router_scale, t.hidden_size, "router.scale", li);
      L.router_per_expert_scale = vec(m.router_per_expert_scale, t.num_experts, "router.per_expert_scale", li);
      L.pre_feedforward_layernorm_2 =
          vec(m.pre_feedforward_layernorm_2, t.hidden_size, "pre_feedforward_layernorm_2", li);
      L.post_feedforward_layernorm_1 =
          vec(m.post_feedforward_layernorm_1, t.hidden_size, "post_feedforward_layernorm_1", li);
      L.post_feedforward_layernorm_2 =
          vec(m.post_feedforward_layernorm_2, t.hidden_size, "post_feedforward_layernorm_2", li);
      const ModuleRef& down = need(m.experts_down, "experts.down_proj", li);
      const int64_t inter = t.moe_intermediate_size;
      for (int64_t e = 0; e < t.num_experts; ++e) {
        if (m.experts_gate_up) {
          const WeightMatrix gu = weight_matrix(*m.experts_gate_up, e);
          if (gu.rows != 2 * inter)
            fail("{}: experts.gate_up_proj has {} rows per expert, expected 2 x moe_intermediate_size = {}",
                 m.experts_gate_up->path, gu.rows, 2 * inter);
          L.expert_gate.push_back(gu.row_slice(0, inter));
          L.expert_up.push_back(gu.row_slice(inter, inter));
        } else {
          L.expert_gate.push_back(weight_matrix(need(m.experts_gate, "experts.switch_glu.gate_proj", li), e));
          L.expert_up.push_back(weight_matrix(need(m.experts_up, "experts.switch_glu.up_proj", li), e));
        }
        L.expert_down.push_back(weight_matrix(down, e));
      }
    }
    if (w.ple_width > 0) {
      L.ple = true;
      L.per_layer_input_gate = weight_matrix(need(m.per_layer_input_gate, "per_layer_input_gate", li));
      L.per_layer_projection = weight_matrix(need(m.per_layer_projection, "per_layer_projection", li));
      L.post_per_layer_input_norm = vec(m.post_per_layer_input_norm, t.hidden_size, "post_per_layer_input_norm", li);
    }
    w.layers.push_back(std::move(L));
  }
  return w;
}

uint64_t TargetWeights::sum_over_decode_matrices(const std::function<uint64_t(const WeightMatrix&)>& bytes) const {
  uint64_t b = bytes(lm_head);
  if (ple_width > 0) b += bytes(per_layer_model_projection);
  for (const TargetLayerWeights& L : layers) {
    for (const WeightMatrix* w : {&L.q_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj}) b += bytes(*w);
    if (L.k_proj) b += bytes(*L.k_proj);
    if (L.v_proj) b += bytes(*L.v_proj);
    if (L.ple) b += bytes(L.per_layer_input_gate) + bytes(L.per_layer_projection);
    if (L.moe) b += bytes(L.router_proj);  // experts depend on routing: counted by the caller
  }
  return b;
}

uint64_t stored_or_packed_bytes(const WeightMatrix& w, bool as_packed) {
  return as_packed && w.packed != nullptr ? static_cast<uint64_t>(packed_bytes(w)) : w.bytes();
}

uint64_t TargetWeights::matrix_bytes_per_token(bool as_packed) const {
  return sum_over_decode_matrices([as_packed](const WeightMatrix& w) { return stored_or_packed_bytes(w, as_packed); });
}

uint64_t TargetWeights::attention_input_bytes_per_token(bool as_packed) const {
  uint64_t b = 0;
  for (const TargetLayerWeights& L : layers) {
    b += stored_or_packed_bytes(L.q_proj, as_packed);
    if (L.k_proj) b += stored_or_packed_bytes(*L.k_proj, as_packed);
    if (L.v_proj) b += stored_or_packed_bytes(*L.v_proj, as_packed);
  }
  return b;
}

std::vector<WeightMatrix*> TargetWeights::matmul_matrices() {
  std::vector<WeightMatrix*> out = {&lm_head};
  if (ple_width > 0) out.push_back(&per_layer_model_projection);
  for (TargetLayerWeights& L : layers) {
    // q, k, v and gate, up back to back: the fast kernels may then run each set as one matmul
    // (model/fused_matrices.h).
    out.push_back(&L.q_proj);
    if (L.k_proj) out.push_back(&*L.k_proj);
    if (L.v_proj) out.push_back(&*L.v_proj);
    for (WeightMatrix* w : {&L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj}) out.push_back(w);
    if (L.ple) {
      out.push_back(&L.per_layer_input_gate);
      out.push_back(&L.per_layer_projection);
    }
    if (L.moe) {
      out.push_back(&L.router_proj);
      for (auto* experts : {&L.expert_gate, &L.expert_up, &L.expert_down}) {
        for (WeightMatrix& w : *experts) out.push_back(&w);
      }
    }
  }
  return out;
}

}  // namespace specula
