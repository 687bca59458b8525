// GGUF metadata of a `gemma4` checkpoint -> config.json keys (docs/gguf.md §2). Every error names
// the file and the GGUF key.
#include "specula/io/gguf_config.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "specula/util/error.h"

namespace specula {

using nlohmann::json;

namespace {

// rope_freqs entries at least this large leave their pair unrotated (llama.cpp writes 1e30).
constexpr float kUnrotatedFactor = 1e20f;

// The architectures: llama.cpp spells the drafter `gemma4-assistant`; the underscore spelling
// (the safetensors model_type) is accepted too. Metadata keys are prefixed with the spelling used.
bool is_drafter_arch(const std::string& arch) { return arch == "gemma4-assistant" || arch == "gemma4_assistant"; }

enum class Role { Target, Drafter };

class MetadataReader {
 public:
  MetadataReader(const GgufFile& f, Role role) : f_(f) {
    arch_ = std::string(f.get_string("general.architecture"));
    if (role == Role::Target && is_drafter_arch(arch_))
      fail(
          "{}: general.architecture is \"{}\": this is an assistant drafter, not a target model; give it as "
          "--draft FILE.gguf beside the target's --model",
          f.path(), arch_);
    if (role == Role::Drafter && arch_ == "gemma4")
      fail(
          "{}: general.architecture is \"gemma4\": this is a target model, not an assistant drafter "
          "(\"gemma4-assistant\"); give it as --model",
          f.path());
    if (role == Role::Target && arch_ != "gemma4")
      fail("{}: general.architecture is \"{}\" but specula runs Gemma 4 (\"gemma4\")", f.path(), arch_);
    if (role == Role::Drafter && !is_drafter_arch(arch_))
      fail("{}: general.architecture is \"{}\" but a Gemma 4 drafter is \"gemma4-assistant\"", f.path(), arch_);
  }

  const GgufFile& file() const { return f_; }
  std::string key(const char* k) const { return arch_ + "." + k; }
  bool has(const char* k) const { return f_.has(key(k)); }

  int64_t positive(const char* k) const {
    const int64_t v = f_.get_int(key(k));
    if (v < 1 || v > (int64_t{1} << 40)) fail("{}: metadata key '{}' = {} is outside [1, 2^40]", f_.path(), key(k), v);
    return v;
  }
  int64_t non_negative_or(const char* k, int64_t fallback) const {
    const auto v = f_.find_int(key(k));
    if (!v) return fallback;
    if (*v < 0 || *v > (int64_t{1} << 40))
      fail("{}: metadata key '{}' = {} is outside [0, 2^40]", f_.path(), key(k), *v);
    return *v;
  }
  double real(const char* k) const {
    const float v = f_.get_f32(key(k));
    if (!std::isfinite(v)) fail("{}: metadata key '{}' must be finite", f_.path(), key(k));
    return v;
  }

  // A value given once for every layer or as an array of `layers` values (llama.cpp's
  // "key or array" keys).
  std::vector<int64_t> per_layer(const char* k, int layers) const {
    const GgufKv* kv = f_.find_kv(key(k));
    if (!kv) fail("{}: metadata key '{}' is missing", f_.path(), key(k));
    std::vector<int64_t> v;
    if (kv->is_array()) {
      v = f_.get_int_array(key(k));
      if (static_cast<int64_t>(v.size()) != layers)
        fail("{}: metadata key '{}' has {} entries but '{}' is {}", f_.path(), key(k), v.size(), key("block_count"),
             layers);
    } else {
      v.assign(static_cast<size_t>(layers), f_.get_int(key(k)));
    }
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] < 1 || v[i] > (int64_t{1} << 40))
        fail("{}: metadata key '{}'[{}] = {} is outside [1, 2^40]", f_.path(), key(k), i, v[i]);
    return v;
  }

 private:
  const GgufFile& f_;
  std::string arch_;
};

std::vector<bool> sliding_layers(const MetadataReader& r, int layers) {
  const GgufFile& f = r.file();
  const std::string k = r.key("attention.sliding_window_pattern");
  const GgufKv* kv = f.find_kv(k);
  if (!kv) fail("{}: metadata key '{}' is missing (which layers use sliding-window attention)", f.path(), k);
  std::vector<bool> sliding(static_cast<size_t>(layers));
  if (kv->is_array()) {
    if (kv->array_type != GgufType::BOOL)
      fail("{}: metadata key '{}' is {}, expected an array of bool or an integer", f.path(), k, kv->type_str());
    if (static_cast<int64_t>(kv->count) != layers)
      fail("{}: metadata key '{}' has {} entries but '{}' is {}", f.path(), k, kv->count, r.key("block_count"), layers);
    for (int i = 0; i < layers; ++i) sliding[static_cast<size_t>(i)] = kv->data[i] != std::byte{0};
    return sliding;
  }
  const int64_t period = f.get_int(k);  // every period-th layer is full attention
  if (period < 1 || period > 4096) fail("{}: metadata key '{}' = {} is outside [1, 4096]", f.path(), k, period);
  for (int i = 0; i < layers; ++i) sliding[static_cast<size_t>(i)] = (i + 1) % period != 0;
  return sliding;
}

// The one value `values` has on layers whose sliding flag is `want` (0 if there are none).
int64_t uniform_over(const MetadataReader& r, const char* k, const std::vector<int64_t>& values,
                     const std::vector<bool>& sliding, bool want) {
  int64_t v = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (sliding[i] != want) continue;
    if (v != 0 && values[i] != v)
      fail(
          "{}: metadata key '{}' differs between {} layers ({} and {} at layer {}); Gemma 4 has one value per "
          "layer type",
          r.file().path(), r.key(k), want ? "sliding-window" : "full-attention", v, values[i], i);
    v = values[i];
  }
  return v;
}

json rope_entry(const char* type, double theta) { return json{{"rope_type", type}, {"rope_theta", theta}}; }

// Full-attention RoPE: proportional when the file carries `rope_freqs` (llama.cpp encodes the
// partial rotation as factor 1 on the rotated pairs and a huge factor on the others), else default
// over the whole head dim.
json full_rope(const MetadataReader& r, int64_t head_dim) {
  const GgufFile& f = r.file();
  const double theta = r.real("rope.freq_base");
  if (theta <= 0) fail("{}: metadata key '{}' = {} must be positive", f.path(), r.key("rope.freq_base"), theta);
  const int64_t n_rot = r.non_negative_or("rope.dimension_count", head_dim);
  if (n_rot != head_dim)
    fail(
        "{}: metadata key '{}' = {} but full-attention layers rotate their whole head dim '{}' = {} (partial "
        "rotation is given by the rope_freqs tensor)",
        f.path(), r.key("rope.dimension_count"), n_rot, r.key("attention.key_length"), head_dim);
  const GgufTensor* t = f.find_tensor("rope_freqs.weight");
  if (!t) return rope_entry("default", theta);
  if (t->type != GgmlType::F32 || t->dims.size() != 1 || t->dims[0] != head_dim / 2)
    fail("{}: tensor rope_freqs.weight is {} {} but must be f32 [{}] (half of '{}' = {})", f.path(),
         ggml_type_name(t->type), t->dims_str(), head_dim / 2, r.key("attention.key_length"), head_dim);
  std::vector<float> v(static_cast<size_t>(t->dims[0]));
  std::memcpy(v.data(), t->data, v.size() * sizeof(float));
  size_t rotated = 0;
  while (rotated < v.size() && v[rotated] < kUnrotatedFactor) ++rotated;
  if (rotated == 0)
    fail("{}: tensor rope_freqs.weight rotates no pair (entry 0 is {}); a proportional RoPE rotates at least one",
         f.path(), v[0]);
  const float factor = v[0];
  for (size_t i = 0; i < v.size(); ++i) {
    const bool ok = i < rotated ? v[i] == factor : v[i] >= kUnrotatedFactor;
    if (!ok || !std::isfinite(factor) || factor <= 0)
      fail(
          "{}: tensor rope_freqs.weight entry {} is {}: specula reads it as a proportional RoPE, {} pairs rotated "
          "at one factor ({}) and the rest unrotated (>= {})",
          f.path(), i, v[i], rotated, factor, kUnrotatedFactor);
  }
  // partial_rotary_factor whose pair count ⌊ρ·D/2⌋ comes out as `rotated` in double arithmetic.
  double rho = static_cast<double>(rotated) / (static_cast<double>(head_dim) / 2.0);
  while (static_cast<int64_t>(rho * static_cast<double>(head_dim) / 2.0) < static_cast<int64_t>(rotated))
    rho = std::nextafter(rho, 2.0);
  json e = rope_entry("proportional", theta);
  e["partial_rotary_factor"] = rho;
  e["factor"] = factor;
  return e;
}

json sliding_rope(const MetadataReader& r, int64_t head_dim) {
  const GgufFile& f = r.file();
  const char* base = r.has("rope.freq_base_swa") ? "rope.freq_base_swa" : "rope.freq_base";
  const double theta = r.real(base);
  if (theta <= 0) fail("{}: metadata key '{}' = {} must be positive", f.path(), r.key(base), theta);
  const int64_t n_rot = r.non_negative_or("rope.dimension_count_swa", head_dim);
  if (n_rot != head_dim)
    fail("{}: metadata key '{}' = {} but sliding-window layers rotate their whole head dim '{}' = {}", f.path(),
         r.key("rope.dimension_count_swa"), n_rot, r.key("attention.key_length_swa"), head_dim);
  return rope_entry("default", theta);
}

// One head dim per layer type; keys and values must agree (Gemma 4 has no separate V width).
int64_t head_dim(const MetadataReader& r, const char* key_length, const char* value_length) {
  const int64_t k = r.positive(key_length);
  if (r.has(value_length)) {
    const int64_t v = r.positive(value_length);
    if (v != k)
      fail("{}: metadata key '{}' = {} differs from '{}' = {}; Gemma 4 keys and values have one width", r.file().path(),
           r.key(value_length), v, r.key(key_length), k);
  }
  return k;
}

void add_feed_forward(json& c, const MetadataReader& r, int layers, int shared) {
  const std::vector<int64_t> ff = r.per_layer("feed_forward_length", layers);
  const int first_shared = layers - shared;
  const int64_t base = ff[0];
  const bool wide = first_shared > 0 && first_shared < layers && ff[static_cast<size_t>(first_shared)] == 2 * base;
  for (int i = 0; i < layers; ++i) {
    const int64_t want = (wide && i >= first_shared) ? 2 * base : base;
    if (ff[static_cast<size_t>(i)] != want)
      fail(
          "{}: metadata key '{}'[{}] = {} but {} is expected: every layer has layer 0's width {}, KV-shared layers "
          "(from layer {}) may all have twice it",
          r.file().path(), r.key("feed_forward_length"), i, ff[static_cast<size_t>(i)], want, base, first_shared);
  }
  c["intermediate_size"] = base;
  c["use_double_wide_mlp"] = wide;
}

void add_attention(json& c, const MetadataReader& r, const std::vector<bool>& sliding) {
  const int layers = static_cast<int>(sliding.size());
  const std::vector<int64_t> heads = r.per_layer("attention.head_count", layers);
  for (int64_t h : heads)
    if (h != heads[0])
      fail("{}: metadata key '{}' differs between layers ({} and {}); Gemma 4 has one query head count",
           r.file().path(), r.key("attention.head_count"), heads[0], h);
  c["num_attention_heads"] = heads[0];
  const std::vector<int64_t> kv = r.per_layer("attention.head_count_kv", layers);
  const int64_t kv_sliding = uniform_over(r, "attention.head_count_kv", kv, sliding, true);
  const int64_t kv_full = uniform_over(r, "attention.head_count_kv", kv, sliding, false);
  c["num_key_value_heads"] = kv_sliding != 0 ? kv_sliding : kv_full;
  if (kv_sliding != 0 && kv_full != 0 && kv_full != kv_sliding) c["num_global_key_value_heads"] = kv_full;
  const int64_t d_sliding = head_dim(r, "attention.key_length_swa", "attention.value_length_swa");
  const int64_t d_full = head_dim(r, "attention.key_length", "attention.value_length");
  c["head_dim"] = d_sliding;
  c["global_head_dim"] = d_full;
  c["sliding_window"] = r.positive("attention.sliding_window");
  json types = json::array();
  for (bool s : sliding) types.push_back(s ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
  c["rope_parameters"] = {{"sliding_attention", sliding_rope(r, d_sliding)}, {"full_attention", full_rope(r, d_full)}};
}

void add_experts(json& c, const MetadataReader& r) {
  const int64_t experts = r.non_negative_or("expert_count", 0);
  c["enable_moe_block"] = experts > 0;
  if (experts == 0) return;
  c["num_experts"] = experts;
  c["top_k_experts"] = r.positive("expert_used_count");
  c["moe_intermediate_size"] = r.positive("expert_feed_forward_length");
}

void add_token_ids(json& c, const GgufFile& f) {
  if (auto bos = f.find_int("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = *bos;
  if (auto pad = f.find_int("tokenizer.ggml.padding_token_id")) c["pad_token_id"] = *pad;
  json eos = json::array();
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (auto id = f.find_int(k)) eos.push_back(*id);
  if (!eos.empty()) c["eos_token_id"] = eos;
}

}  // namespace

std::vector<float> proportional_rope_freqs(int64_t half_dim, int64_t rotated, float factor) {
  std::vector<float> v(static_cast<size_t>(half_dim), 1e30f);
  for (int64_t i = 0; i < rotated && i < half_dim; ++i) v[static_cast<size_t>(i)] = factor;
  return v;
}

namespace {

// The flat `gemma4_text` keys both roles share. Without `attention.shared_kv_layers` no layer
// shares its KV cache, or all of them do when `all_shared_by_default` (a drafter).
json text_config(const MetadataReader& r, bool all_shared_by_default) {
  const GgufFile& f = r.file();
  json c;
  c["model_type"] = "gemma4_text";
  c["hidden_size"] = r.positive("embedding_length");
  const int64_t layers = r.positive("block_count");
  if (layers > 4096) fail("{}: metadata key '{}' = {} exceeds 4096", f.path(), r.key("block_count"), layers);
  const int nl = static_cast<int>(layers);
  c["num_hidden_layers"] = layers;
  const int64_t shared = r.non_negative_or("attention.shared_kv_layers", all_shared_by_default ? layers : 0);
  if (shared > layers)
    fail("{}: metadata key '{}' = {} exceeds '{}' = {}", f.path(), r.key("attention.shared_kv_layers"), shared,
         r.key("block_count"), layers);
  c["num_kv_shared_layers"] = shared;
  add_feed_forward(c, r, nl, static_cast<int>(shared));
  add_attention(c, r, sliding_layers(r, nl));
  const double eps = r.real("attention.layer_norm_rms_epsilon");
  c["rms_norm_eps"] = eps;
  if (auto cap = f.find_f32(r.key("final_logit_softcapping")); cap && *cap != 0.0f)
    c["final_logit_softcapping"] = *cap;
  else
    c["final_logit_softcapping"] = nullptr;
  c["hidden_size_per_layer_input"] = r.non_negative_or("embedding_length_per_layer_input", 0);
  add_experts(c, r);
  if (r.has("context_length")) c["max_position_embeddings"] = r.positive("context_length");
  const GgufTensor* embed = f.find_tensor("token_embd.weight");
  if (!embed) fail("{}: missing tensor token_embd.weight (the token embedding table)", f.path());
  if (embed->dims.size() != 2)
    fail("{}: tensor token_embd.weight has dims {} but must be 2-d", f.path(), embed->dims_str());
  c["vocab_size"] = embed->dims[1];
  c["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  add_token_ids(c, f);
  return c;
}

// What a drafter cannot have, refused naming the GGUF key (the same rules the config parser
// applies to a drafter's config.json).
void check_drafter_text(const MetadataReader& r, const json& text) {
  const GgufFile& f = r.file();
  const int64_t layers = text.at("num_hidden_layers").get<int64_t>();
  if (text.at("num_kv_shared_layers").get<int64_t>() != layers)
    fail("{}: metadata key '{}' = {} must equal '{}' = {}: a drafter owns no KV cache", f.path(),
         r.key("attention.shared_kv_layers"), text.at("num_kv_shared_layers").get<int64_t>(), r.key("block_count"),
         layers);
  if (text.at("enable_moe_block").get<bool>())
    fail("{}: metadata key '{}' is {}: MoE drafters are not supported", f.path(), r.key("expert_count"),
         text.at("num_experts").get<int64_t>());
  if (text.at("hidden_size_per_layer_input").get<int64_t>() != 0)
    fail("{}: metadata key '{}' = {}: a drafter has no per-layer inputs", f.path(),
         r.key("embedding_length_per_layer_input"), text.at("hidden_size_per_layer_input").get<int64_t>());
  // llama.cpp writes the drafter's layer count here and requires it to be all of them.
  const int64_t nextn = r.non_negative_or("nextn_predict_layers", layers);
  if (nextn != layers)
    fail("{}: metadata key '{}' = {} but every one of the '{}' = {} layers is a draft layer", f.path(),
         r.key("nextn_predict_layers"), nextn, r.key("block_count"), layers);
}

}  // namespace

json gguf_target_config(const GgufFile& f) { return text_config(MetadataReader(f, Role::Target), false); }

json gguf_drafter_config(const GgufFile& f) {
  const MetadataReader r(f, Role::Drafter);
  json text = text_config(r, true);
  check_drafter_text(r, text);
  json c;
  c["model_type"] = "gemma4_assistant";
  c["backbone_hidden_size"] = r.positive("embedding_length_out");
  // llama.cpp's converter drops the centroid head (masked_embedding.*): the dense tied head runs.
  c["use_ordered_embeddings"] = false;
  c["tie_word_embeddings"] = text.at("tie_word_embeddings");
  for (const char* k : {"bos_token_id", "pad_token_id", "eos_token_id"})
    if (text.contains(k)) c[k] = text[k];
  c["text_config"] = std::move(text);
  return c;
}

}  // namespace specula
