#include "specula/synth/towers.h"

#include <fmt/format.h>

namespace specula::synth {

namespace {

using Kind = TowerTensor::Kind;

class TowerList {
 public:
  explicit TowerList(std::string root) : root_(std::move(root)) {}

  void add(const std::string& name, std::vector<int64_t> shape, Kind kind) {
    out_.push_back({root_ + name, std::move(shape), kind, false});
  }
  // A Gemma 4 clipped linear: `<name>.linear.weight` and, when clipping is stored, its four bounds.
  void clipped_linear(const std::string& name, int64_t out, int64_t in, bool bounds) {
    add(name + ".linear.weight", {out, in}, Kind::Linear);
    if (!bounds) return;
    for (const char* b : {"input_min", "input_max", "output_min", "output_max"}) {
      const std::string s(b);
      out_.push_back({root_ + name + "." + s, {}, Kind::ClipBound, s.ends_with("_min")});
    }
  }
  std::vector<TowerTensor> take() { return std::move(out_); }

 private:
  std::string root_;
  std::vector<TowerTensor> out_;
};

void vision_tensors(const VisionTowerPreset& v, int64_t text_hidden, const std::string& root,
                    std::vector<TowerTensor>& out) {
  TowerList t(root);
  const int64_t h = v.hidden_size, q = static_cast<int64_t>(v.num_heads) * v.head_dim, in = v.intermediate_size;
  t.add("vision_tower.patch_embedder.input_proj.weight", {h, 3ll * v.patch_size * v.patch_size}, Kind::Linear);
  t.add("vision_tower.patch_embedder.position_embedding_table", {2, v.position_embedding_size, h}, Kind::Table);
  for (int l = 0; l < v.num_layers; ++l) {
    const std::string L = fmt::format("vision_tower.encoder.layers.{}.", l);
    for (const char* norm :
         {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      t.add(L + norm + ".weight", {h}, Kind::Norm);
    for (const char* p : {"q_proj", "k_proj", "v_proj"})
      t.clipped_linear(L + "self_attn." + p, q, h, v.clipped_linears);
    t.clipped_linear(L + "self_attn.o_proj", h, q, v.clipped_linears);
    t.add(L + "self_attn.q_norm.weight", {v.head_dim}, Kind::Norm);
    t.add(L + "self_attn.k_norm.weight", {v.head_dim}, Kind::Norm);
    t.clipped_linear(L + "mlp.gate_proj", in, h, v.clipped_linears);
    t.clipped_linear(L + "mlp.up_proj", in, h, v.clipped_linears);
    t.clipped_linear(L + "mlp.down_proj", h, in, v.clipped_linears);
  }
  if (v.standardize) {
    t.add("vision_tower.std_bias", {h}, Kind::Bias);
    t.add("vision_tower.std_scale", {h}, Kind::Norm);
  }
  t.add("embed_vision.embedding_projection.weight", {text_hidden, h}, Kind::Linear);
  for (auto& x : t.take()) out.push_back(std::move(x));
}

void audio_tensors(const AudioTowerPreset& a, int64_t text_hidden, const std::string& root,
                   std::vector<TowerTensor>& out) {
  TowerList t(root);
  const int64_t h = a.hidden_size, c0 = a.conv_channels[0], c1 = a.conv_channels[1];
  const std::string S = "audio_tower.subsample_conv_projection.";
  t.add(S + "layer0.conv.weight", {c0, 1, 3, 3}, Kind::Linear);
  t.add(S + "layer0.norm.weight", {c0}, Kind::Norm);
  t.add(S + "layer1.conv.weight", {c1, c0, 3, 3}, Kind::Linear);
  t.add(S + "layer1.norm.weight", {c1}, Kind::Norm);
  // Two stride-2 convolutions quarter the mel bins; the channels of each bin are concatenated.
  t.add(S + "input_proj_linear.weight", {h, a.feature_size / 4 * c1}, Kind::Linear);
  for (int l = 0; l < a.num_layers; ++l) {
    const std::string L = fmt::format("audio_tower.layers.{}.", l);
    for (const char* ff : {"feed_forward1", "feed_forward2"}) {
      const std::string F = L + ff + ".";
      t.add(F + "pre_layer_norm.weight", {h}, Kind::Norm);
      t.clipped_linear(F + "ffw_layer_1", 4 * h, h, true);
      t.clipped_linear(F + "ffw_layer_2", h, 4 * h, true);
      t.add(F + "post_layer_norm.weight", {h}, Kind::Norm);
    }
    for (const char* p : {"q_proj", "k_proj", "v_proj", "post"}) t.clipped_linear(L + "self_attn." + p, h, h, true);
    t.add(L + "self_attn.relative_k_proj.weight", {h, h}, Kind::Linear);
    t.add(L + "self_attn.per_dim_scale", {h / a.num_heads}, Kind::Bias);
    for (const char* norm : {"norm_pre_attn", "norm_post_attn", "norm_out"})
      t.add(L + norm + ".weight", {h}, Kind::Norm);
    t.add(L + "lconv1d.pre_layer_norm.weight", {h}, Kind::Norm);
    t.clipped_linear(L + "lconv1d.linear_start", 2 * h, h, true);
    t.add(L + "lconv1d.depthwise_conv1d.weight", {h, 1, a.conv_kernel_size}, Kind::Linear);
    t.add(L + "lconv1d.conv_norm.weight", {h}, Kind::Norm);
    t.clipped_linear(L + "lconv1d.linear_end", h, h, true);
  }
  t.add("audio_tower.output_proj.weight", {a.output_proj_dims, h}, Kind::Linear);
  t.add("audio_tower.output_proj.bias", {a.output_proj_dims}, Kind::Bias);
  t.add("embed_audio.embedding_projection.weight", {text_hidden, a.output_proj_dims}, Kind::Linear);
  for (auto& x : t.take()) out.push_back(std::move(x));
}

}  // namespace

std::vector<TowerTensor> tower_tensors(const Preset& preset, int64_t text_hidden, bool hf_naming) {
  const std::string root = hf_naming ? "model." : "";
  std::vector<TowerTensor> out;
  if (preset.vision) vision_tensors(*preset.vision, text_hidden, root, out);
  if (preset.audio) audio_tensors(*preset.audio, text_hidden, root, out);
  return out;
}

nlohmann::json vision_config_json(const VisionTowerPreset& v) {
  return {{"model_type", "gemma4_vision"},
          {"hidden_size", v.hidden_size},
          {"intermediate_size", v.intermediate_size},
          {"num_hidden_layers", v.num_layers},
          {"num_attention_heads", v.num_heads},
          {"num_key_value_heads", v.num_heads},
          {"head_dim", v.head_dim},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"rms_norm_eps", 1e-6},
          {"patch_size", v.patch_size},
          {"pooling_kernel_size", 3},
          {"position_embedding_size", v.position_embedding_size},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 100.0}}},
          {"standardize", v.standardize},
          {"use_clipped_linears", v.clipped_linears}};
}

nlohmann::json audio_config_json(const AudioTowerPreset& a) {
  return {{"model_type", "gemma4_audio"},
          {"hidden_size", a.hidden_size},
          {"num_hidden_layers", a.num_layers},
          {"num_attention_heads", a.num_heads},
          {"hidden_act", "silu"},
          {"subsampling_conv_channels", {a.conv_channels[0], a.conv_channels[1]}},
          {"conv_kernel_size", a.conv_kernel_size},
          {"attention_chunk_size", 12},
          {"attention_context_left", 13},
          {"attention_context_right", 0},
          {"attention_logit_cap", 50.0},
          {"residual_weight", 0.5},
          {"output_proj_dims", a.output_proj_dims},
          {"rms_norm_eps", 1e-6},
          {"use_clipped_linears", true}};
}

nlohmann::json processor_config_json(const Preset& preset) {
  nlohmann::json j = {{"processor_class", "Gemma4Processor"}};
  if (preset.vision)
    j["image_processor"] = {{"image_processor_type", "Gemma4ImageProcessor"},
                            {"patch_size", preset.vision->patch_size},
                            {"pooling_kernel_size", 3}};
  if (preset.audio)
    j["feature_extractor"] = {{"feature_extractor_type", "Gemma4AudioFeatureExtractor"},
                              {"feature_size", preset.audio->feature_size},
                              {"sampling_rate", 16000}};
  return j;
}

}  // namespace specula::synth
