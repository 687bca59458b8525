// GGUF <-> safetensors tensor names of Gemma 4 (docs/gguf.md §3).
#include "specula/io/gguf_names.h"

#include <cctype>
#include <string_view>

namespace specula {

namespace {

struct NamePair {
  std::string_view gguf;  // after `blk.N.` for layer tensors
  std::string_view hf;    // after `model.layers.N.` for layer tensors
};

// Whole-model tensors.
constexpr NamePair kGlobal[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"per_layer_token_embd.weight", "model.embed_tokens_per_layer.weight"},
    {"per_layer_model_proj.weight", "model.per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "model.per_layer_projection_norm.weight"},
    // The assistant drafter's projections between the target's width and its own.
    {"nextn.pre_projection.weight", "pre_projection.weight"},
    {"nextn.post_projection.weight", "post_projection.weight"},
};

// Per-layer tensors. The expert down projection is listed twice: its HF name depends on the
// expert form (fused gate_up: `experts.down_proj`, split: `experts.switch_glu.down_proj`).
constexpr NamePair kLayer[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"ffn_gate_inp.weight", "router.proj.weight"},
    {"ffn_gate_inp.scale", "router.scale"},
    {"ffn_down_exps.scale", "router.per_expert_scale"},
    {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
    {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
    {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
    {"ffn_gate_up_exps.weight", "experts.gate_up_proj.weight"},
    {"ffn_gate_exps.weight", "experts.switch_glu.gate_proj.weight"},
    {"ffn_up_exps.weight", "experts.switch_glu.up_proj.weight"},
    {"ffn_down_exps.weight", "experts.down_proj.weight"},
    {"ffn_down_exps.weight", "experts.switch_glu.down_proj.weight"},
};

constexpr std::string_view kBlk = "blk.";
constexpr std::string_view kLayers = "model.layers.";

// Splits "<prefix>N.<rest>" into N and rest; nullopt if `name` has another form.
std::optional<std::pair<std::string, std::string_view>> split_layer(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  size_t digits = 0;
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
  if (digits == 0 || digits > 6 || digits >= name.size() || name[digits] != '.') return std::nullopt;
  return std::make_pair(std::string(name.substr(0, digits)), name.substr(digits + 1));
}

// Strips ".weight" (module paths have none) so a module path maps like its weight.
std::optional<std::string> map_module_or_tensor(std::string_view name, bool to_gguf) {
  for (const NamePair& p : kGlobal) {
    const std::string_view from = to_gguf ? p.hf : p.gguf, to = to_gguf ? p.gguf : p.hf;
    if (name == from) return std::string(to);
  }
  const auto layer = split_layer(name, to_gguf ? kLayers : kBlk);
  if (!layer) return std::nullopt;
  for (const NamePair& p : kLayer) {
    const std::string_view from = to_gguf ? p.hf : p.gguf, to = to_gguf ? p.gguf : p.hf;
    if (layer->second == from) return std::string(to_gguf ? kBlk : kLayers) + layer->first + "." + std::string(to);
  }
  return std::nullopt;
}

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_'; }

}  // namespace

std::optional<std::string> gguf_to_hf_name(const std::string& gguf_name, bool fused_experts) {
  std::optional<std::string> hf = map_module_or_tensor(gguf_name, false);
  if (hf && !fused_experts) {
    const std::string fused_down = "experts.down_proj.weight";
    if (hf->size() > fused_down.size() && hf->ends_with("." + fused_down))
      hf = hf->substr(0, hf->size() - fused_down.size()) + "experts.switch_glu.down_proj.weight";
  }
  return hf;
}

std::optional<std::string> hf_to_gguf_name(const std::string& hf_name) {
  if (auto g = map_module_or_tensor(hf_name, true)) return g;
  for (std::string_view suffix : {".scales", ".biases"}) {
    if (hf_name.ends_with(suffix)) {
      const std::string base = hf_name.substr(0, hf_name.size() - suffix.size());
      if (auto g = map_module_or_tensor(base + ".weight", true)) return g;
    }
  }
  if (auto g = map_module_or_tensor(hf_name + ".weight", true)) return g->substr(0, g->size() - 7);
  return std::nullopt;
}

std::string with_gguf_names(const std::string& message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    if (!name_char(message[i])) {
      out += message[i++];
      continue;
    }
    size_t j = i;
    while (j < message.size() && name_char(message[j])) ++j;
    std::string word = message.substr(i, j - i);
    std::string trail;
    while (!word.empty() && word.back() == '.') {  // sentence punctuation
      trail += '.';
      word.pop_back();
    }
    const bool hf_like = word.starts_with("model.") || word.starts_with("lm_head") ||
                         word.starts_with("pre_projection") || word.starts_with("post_projection");
    const auto g = hf_like ? hf_to_gguf_name(word) : std::nullopt;
    out += g ? *g : word;
    out += trail;
    i = j;
  }
  return out;
}

}  // namespace specula
