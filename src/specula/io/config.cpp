// Config parsing and validation (docs/gemma4.md §2, §7). Every error names the file and the key.
#include "specula/io/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "specula/util/error.h"

namespace specula {

using nlohmann::json;

namespace {

// Sanity bound for every size-like integer: keeps all products of two of them far from overflow.
constexpr int64_t kMaxDim = int64_t{1} << 24;

std::string type_of(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}

// Typed access to one JSON object; `prefix` ("text_config.") makes messages name the full key.
class Reader {
 public:
  Reader(const json& obj, std::string prefix, std::string source)
      : obj_(obj), prefix_(std::move(prefix)), source_(std::move(source)) {}

  const json& obj() const { return obj_; }
  const std::string& source() const { return source_; }
  std::string key(const std::string& k) const { return prefix_ + k; }

  // nullptr when the key is absent or JSON null.
  const json* find(const std::string& k) const {
    auto it = obj_.find(k);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const std::string& k) const { return find(k) != nullptr; }
  bool present(const std::string& k) const { return obj_.contains(k); }  // null counts as present

  [[noreturn]] void missing(const std::string& k) const { fail("{}: required key '{}' is missing", source_, key(k)); }
  [[noreturn]] void wrong_type(const std::string& k, const json& v, const char* want) const {
    fail("{}: key '{}' must be {}, got {} ({})", source_, key(k), want, type_of(v), v.dump());
  }

  int64_t int_value(const std::string& k, const json& v, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) wrong_type(k, v, "an integer");
    int64_t x = 0;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) fail("{}: key '{}' = {} exceeds the limit {}", source_, key(k), u, hi);
      x = static_cast<int64_t>(u);
    } else {
      x = v.get<int64_t>();
    }
    if (x < lo || x > hi) fail("{}: key '{}' = {} is outside [{}, {}]", source_, key(k), x, lo, hi);
    return x;
  }
  int64_t req_int(const std::string& k, int64_t lo, int64_t hi = kMaxDim) const {
    const json* v = find(k);
    if (!v) missing(k);
    return int_value(k, *v, lo, hi);
  }
  std::optional<int64_t> opt_int(const std::string& k, int64_t lo, int64_t hi = kMaxDim) const {
    const json* v = find(k);
    if (!v) return std::nullopt;
    return int_value(k, *v, lo, hi);
  }
  double num_value(const std::string& k, const json& v) const {
    if (!v.is_number()) wrong_type(k, v, "a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail("{}: key '{}' must be finite", source_, key(k));
    return d;
  }
  double req_num(const std::string& k) const {
    const json* v = find(k);
    if (!v) missing(k);
    return num_value(k, *v);
  }
  std::optional<double> opt_num(const std::string& k) const {
    const json* v = find(k);
    if (!v) return std::nullopt;
    return num_value(k, *v);
  }
  std::optional<bool> opt_bool(const std::string& k) const {
    const json* v = find(k);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(k, *v, "true or false");
    return v->get<bool>();
  }
  std::optional<std::string> opt_string(const std::string& k) const {
    const json* v = find(k);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(k, *v, "a string");
    return v->get<std::string>();
  }
  // A token id or a list of token ids (eos_token_id style).
  std::vector<int> id_list(const std::string& k) const {
    const json* v = find(k);
    std::vector<int> out;
    if (!v) return out;
    if (v->is_array()) {
      for (const json& e : *v) out.push_back(static_cast<int>(int_value(k, e, 0, kMaxDim)));
    } else if (v->is_number_integer()) {
      out.push_back(static_cast<int>(int_value(k, *v, 0, kMaxDim)));
    } else {
      wrong_type(k, *v, "a token id or a list of token ids");
    }
    return out;
  }

 private:
  const json& obj_;
  std::string prefix_;
  std::string source_;
};

void append_unique(std::vector<int>& out, const std::vector<int>& add) {
  for (int id : add)
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
}

bool valid_bits(int64_t b) { return b == 2 || b == 3 || b == 4 || b == 5 || b == 6 || b == 8; }
bool valid_group(int64_t g) { return g == 16 || g == 32 || g == 64 || g == 128; }

// Fills the fields present in `r` into `spec` (absent ones keep the values already there).
void read_quant_fields(const Reader& r, QuantSpec& spec) {
  if (const json* v = r.find("bits")) {
    const int64_t b = r.int_value("bits", *v, 0, 64);
    if (!valid_bits(b))
      fail("{}: key '{}' = {} is not a supported bit width (2, 3, 4, 5, 6, 8)", r.source(), r.key("bits"), b);
    spec.bits = static_cast<int>(b);
  }
  if (const json* v = r.find("group_size")) {
    const int64_t g = r.int_value("group_size", *v, 0, 1 << 20);
    if (!valid_group(g))
      fail("{}: key '{}' = {} is not a supported group size (16, 32, 64, 128)", r.source(), r.key("group_size"), g);
    spec.group_size = static_cast<int>(g);
  }
  if (auto m = r.opt_string("mode")) {
    if (*m != "affine")
      fail("{}: key '{}' = \"{}\": only MLX affine quantization is supported (not mxfp4/nvfp4/mxfp8)", r.source(),
           r.key("mode"), *m);
    spec.mode = *m;
  }
  if (const json* v = r.find("superblock")) spec.superblock = static_cast<int>(r.int_value("superblock", *v, 0, 4096));
  if (const json* v = r.find("code_bits")) spec.code_bits = static_cast<int>(r.int_value("code_bits", *v, 0, 8));
}

RopeParams default_rope(LayerType t) {
  RopeParams p;
  if (t == LayerType::Full) {
    p.type = "proportional";
    p.theta = 1000000.0;
    p.partial_rotary_factor = 0.25;
  }
  return p;
}

RopeParams parse_rope_entry(const Reader& r, LayerType t) {
  const std::string name = layer_type_name(t);
  const json* e = r.find(name);
  if (!e) return default_rope(t);
  if (!e->is_object()) r.wrong_type(name, *e, "an object");
  Reader er(*e, r.key(name) + ".", r.source());
  RopeParams p;
  if (auto ty = er.opt_string("rope_type"))
    p.type = *ty;
  else if (auto ty2 = er.opt_string("type"))
    p.type = *ty2;  // mlx-lm alias
  if (p.type != "default" && p.type != "linear" && p.type != "proportional")
    fail("{}: key '{}' = \"{}\" is not a supported RoPE type (default, linear, proportional)", r.source(),
         er.key("rope_type"), p.type);
  p.theta = er.req_num("rope_theta");
  if (!(p.theta > 0)) fail("{}: key '{}' = {} must be positive", r.source(), er.key("rope_theta"), p.theta);
  p.factor = er.opt_num("factor").value_or(1.0);
  if (!(p.factor > 0)) fail("{}: key '{}' = {} must be positive", r.source(), er.key("factor"), p.factor);
  p.partial_rotary_factor = er.opt_num("partial_rotary_factor").value_or(1.0);
  if (!(p.partial_rotary_factor > 0 && p.partial_rotary_factor <= 1))
    fail("{}: key '{}' = {} must be in (0, 1]", r.source(), er.key("partial_rotary_factor"), p.partial_rotary_factor);
  return p;
}

LayerType parse_layer_type(const Reader& r, size_t index, const json& v) {
  const std::string k = fmt::format("layer_types[{}]", index);
  if (!v.is_string()) r.wrong_type(k, v, "a string");
  const std::string s = v.get<std::string>();
  if (s == "sliding_attention") return LayerType::Sliding;
  if (s == "full_attention") return LayerType::Full;
  fail("{}: key '{}' = \"{}\" is not a known layer type (sliding_attention, full_attention)", r.source(), r.key(k), s);
}

// The expert MLP width: current configs name it `expert_intermediate_size`, older ones
// `moe_intermediate_size`; both may be present only with one value. 0 = absent.
int64_t moe_width(const Reader& r) {
  const auto moe = r.opt_int("moe_intermediate_size", 1);
  const auto expert = r.opt_int("expert_intermediate_size", 1);
  if (moe && expert && *moe != *expert)
    fail("{}: '{}' = {} disagrees with '{}' = {}", r.source(), r.key("moe_intermediate_size"), *moe,
         r.key("expert_intermediate_size"), *expert);
  return moe ? *moe : expert.value_or(0);
}

enum class TextRole { Target, Drafter };

// Parses the keys of a Gemma 4 text config (docs/gemma4.md §2.2). Keys whose defaults differ across
// stacks are recorded in keys_to_infer when absent instead of being silently defaulted.
TextConfig parse_text(const Reader& r, TextRole role) {
  TextConfig t;
  t.model_type = r.opt_string("model_type").value_or("");
  t.hidden_size = r.req_int("hidden_size", 1);
  t.num_hidden_layers = static_cast<int>(r.req_int("num_hidden_layers", 1, 4096));
  t.num_attention_heads = static_cast<int>(r.req_int("num_attention_heads", 1, 4096));
  if (role == TextRole::Target) {
    t.num_key_value_heads = static_cast<int>(r.req_int("num_key_value_heads", 1, 4096));
  } else {  // unused by a drafter: its K/V heads are the target donor's (docs/gemma4.md §2.2)
    t.num_key_value_heads = static_cast<int>(r.opt_int("num_key_value_heads", 1, 4096).value_or(0));
  }
  if (auto g = r.opt_int("num_global_key_value_heads", 1, 4096)) t.num_global_key_value_heads = static_cast<int>(*g);
  t.head_dim = static_cast<int>(r.req_int("head_dim", 1, 65536));
  if (auto g = r.opt_int("global_head_dim", 1, 65536)) {
    t.global_head_dim = static_cast<int>(*g);
  } else {
    t.keys_to_infer.push_back("global_head_dim");  // HF/mlx-lm 512 vs mlx-bun head_dim
  }
  if (auto b = r.opt_bool("attention_k_eq_v"))
    t.attention_k_eq_v = *b;
  else if (role == TextRole::Target)
    t.keys_to_infer.push_back("attention_k_eq_v");
  t.intermediate_size = r.req_int("intermediate_size", 1);
  t.rms_norm_eps = r.req_num("rms_norm_eps");
  if (!(t.rms_norm_eps > 0 && t.rms_norm_eps < 1))
    fail("{}: key '{}' = {} must be in (0, 1)", r.source(), r.key("rms_norm_eps"), t.rms_norm_eps);
  // vocab_size: the multimodal wrapper's top-level value wins in mlx-lm; the caller reconciles.
  if (auto v = r.opt_int("vocab_size", 1)) t.vocab_size = *v;
  t.sliding_window = static_cast<int>(r.req_int("sliding_window", 1, int64_t{1} << 30));

  // layer_types, or a synthesised pattern when only sliding_window_pattern is given.
  if (const json* lt = r.find("layer_types")) {
    if (!lt->is_array()) r.wrong_type("layer_types", *lt, "a list of layer types");
    for (size_t i = 0; i < lt->size(); ++i) t.layer_types.push_back(parse_layer_type(r, i, (*lt)[i]));
    if (static_cast<int64_t>(t.layer_types.size()) != t.num_hidden_layers)
      fail("{}: '{}' has {} entries but '{}' is {}", r.source(), r.key("layer_types"), t.layer_types.size(),
           r.key("num_hidden_layers"), t.num_hidden_layers);
  } else if (auto pat = r.opt_int("sliding_window_pattern", 1, 4096)) {
    // HF forces the last layer to full attention, mlx-lm does not: they agree only when the
    // pattern divides the layer count, so specula requires that.
    if (t.num_hidden_layers % *pat != 0)
      fail(
          "{}: '{}' is missing and '{}' = {} does not divide '{}' = {}: the stacks disagree on the last "
          "layer's type; add layer_types",
          r.source(), r.key("layer_types"), r.key("sliding_window_pattern"), *pat, r.key("num_hidden_layers"),
          t.num_hidden_layers);
    for (int i = 0; i < t.num_hidden_layers; ++i)
      t.layer_types.push_back((i + 1) % *pat == 0 ? LayerType::Full : LayerType::Sliding);
  } else {
    fail("{}: required key '{}' is missing (and there is no '{}')", r.source(), r.key("layer_types"),
         r.key("sliding_window_pattern"));
  }

  // rope_parameters (docs/gemma4.md §2.3): whole dict or an entry missing -> the documented
  // defaults.
  t.rope_sliding = default_rope(LayerType::Sliding);
  t.rope_full = default_rope(LayerType::Full);
  if (const json* rp = r.find("rope_parameters")) {
    if (!rp->is_object()) r.wrong_type("rope_parameters", *rp, "an object keyed by layer type");
    Reader rr(*rp, r.key("rope_parameters") + ".", r.source());
    t.rope_sliding = parse_rope_entry(rr, LayerType::Sliding);
    t.rope_full = parse_rope_entry(rr, LayerType::Full);
  }

  // final_logit_softcapping: HF None vs mlx-lm 30.0 and not inferable from tensors -> required
  // (JSON null is the explicit "no softcapping").
  if (!r.present("final_logit_softcapping"))
    fail(
        "{}: required key '{}' is missing (stacks disagree on its default: HF none, mlx-lm 30.0; write null "
        "for none)",
        r.source(), r.key("final_logit_softcapping"));
  if (auto c = r.opt_num("final_logit_softcapping")) {
    if (!(*c > 0)) fail("{}: key '{}' = {} must be positive or null", r.source(), r.key("final_logit_softcapping"), *c);
    t.final_logit_softcapping = *c;
  }

  if (auto w = r.opt_int("hidden_size_per_layer_input", 0)) {
    t.hidden_size_per_layer_input = *w;
  } else if (role == TextRole::Target) {
    t.keys_to_infer.push_back("hidden_size_per_layer_input");  // HF/mlx-lm 256 vs mlx-bun 0
  }
  if (auto v = r.opt_int("vocab_size_per_layer_input", 0))
    t.vocab_size_per_layer_input = *v;
  else if (role == TextRole::Target)
    t.keys_to_infer.push_back("vocab_size_per_layer_input");

  if (auto n = r.opt_int("num_kv_shared_layers", 0, t.num_hidden_layers)) {
    t.num_kv_shared_layers = static_cast<int>(*n);
  } else if (role == TextRole::Target) {
    t.keys_to_infer.push_back("num_kv_shared_layers");  // HF 0 vs mlx-lm 20
  } else {
    t.num_kv_shared_layers = t.num_hidden_layers;  // a drafter owns no KV cache by definition
  }
  if (auto b = r.opt_bool("use_double_wide_mlp"))
    t.use_double_wide_mlp = *b;
  else if (role == TextRole::Target)
    t.keys_to_infer.push_back("use_double_wide_mlp");  // HF false vs mlx-lm true

  if (auto b = r.opt_bool("enable_moe_block"))
    t.enable_moe_block = *b;
  else if (role == TextRole::Target)
    t.keys_to_infer.push_back("enable_moe_block");
  if (auto e = r.opt_int("num_experts", 1, 65536)) t.num_experts = static_cast<int>(*e);
  if (auto k = r.opt_int("top_k_experts", 1, 65536)) t.top_k_experts = static_cast<int>(*k);
  t.moe_intermediate_size = moe_width(r);
  if (t.enable_moe_block) {
    if (t.top_k_experts == 0)  // only the config knows it
      fail("{}: '{}' is true but '{}' is missing", r.source(), r.key("enable_moe_block"), r.key("top_k_experts"));
    if (t.num_experts == 0) t.keys_to_infer.push_back("num_experts");
    if (t.moe_intermediate_size == 0) t.keys_to_infer.push_back("moe_intermediate_size");
    if (t.num_experts > 0 && t.top_k_experts > t.num_experts)
      fail("{}: '{}' = {} exceeds '{}' = {}", r.source(), r.key("top_k_experts"), t.top_k_experts, r.key("num_experts"),
           t.num_experts);
  }

  if (auto b = r.opt_bool("tie_word_embeddings")) t.tie_word_embeddings = *b;
  if (auto m = r.opt_int("max_position_embeddings", 1, int64_t{1} << 40)) t.max_position_embeddings = *m;
  if (auto act = r.opt_string("hidden_activation")) {
    if (*act != "gelu_pytorch_tanh")
      fail("{}: key '{}' = \"{}\": Gemma 4 uses gelu_pytorch_tanh", r.source(), r.key("hidden_activation"), *act);
    t.hidden_activation = *act;
  }
  return t;
}

// tie_word_embeddings lives in text_config or at top level; absent in both -> inferred from the
// presence of an lm_head tensor (HF/mlx-lm default true, mlx-bun false).
void resolve_tie(TextConfig& t, const Reader& text, const Reader& top) {
  if (text.has("tie_word_embeddings")) return;  // already read
  if (auto b = top.opt_bool("tie_word_embeddings")) {
    t.tie_word_embeddings = *b;
    return;
  }
  t.keys_to_infer.push_back("tie_word_embeddings");
}

// Keeps mlx-lm's rule (the wrapper's top-level vocab_size wins) but refuses a silent conflict.
void resolve_vocab(TextConfig& t, const Reader& text, const Reader& top, bool nested) {
  if (!nested) {
    if (t.vocab_size == 0) text.missing("vocab_size");
    return;
  }
  const auto top_v = top.opt_int("vocab_size", 1);
  if (top_v && t.vocab_size != 0 && *top_v != t.vocab_size)
    fail("{}: 'vocab_size' = {} disagrees with '{}' = {}", top.source(), *top_v, text.key("vocab_size"), t.vocab_size);
  if (top_v) t.vocab_size = *top_v;
  if (t.vocab_size == 0) text.missing("vocab_size");
}

std::vector<LayerGeometry> derive(const TextConfig& text, const std::string& source, TextRole role) {
  const int nl = text.num_hidden_layers;
  if (static_cast<int>(text.layer_types.size()) != nl)
    fail("{}: layer_types has {} entries but num_hidden_layers is {}", source, text.layer_types.size(), nl);
  if (text.num_kv_shared_layers < 0 || text.num_kv_shared_layers > nl)
    fail("{}: num_kv_shared_layers = {} is outside [0, num_hidden_layers = {}]", source, text.num_kv_shared_layers, nl);
  const int first_shared = nl - text.num_kv_shared_layers;
  std::vector<LayerGeometry> out(static_cast<size_t>(nl));
  for (int i = 0; i < nl; ++i) {
    LayerGeometry& g = out[static_cast<size_t>(i)];
    g.index = i;
    g.type = text.layer_types[static_cast<size_t>(i)];
    const bool sliding = g.type == LayerType::Sliding;
    g.head_dim = (!sliding && text.global_head_dim > 0) ? text.global_head_dim : text.head_dim;
    g.k_eq_v = text.attention_k_eq_v && !sliding;
    g.num_kv_heads =
        (g.k_eq_v && text.num_global_key_value_heads) ? *text.num_global_key_value_heads : text.num_key_value_heads;
    g.kv_donor = i < first_shared;
    g.mlp_width =
        text.intermediate_size * ((text.use_double_wide_mlp && i >= first_shared && first_shared > 0) ? 2 : 1);
    g.rope = sliding ? text.rope_sliding : text.rope_full;
    if (role == TextRole::Drafter) {
      g.kv_donor = false;
      g.kv_source = -1;  // bound to the target's donor of this type at run time
      g.num_kv_heads = 0;
      continue;
    }
    if (g.num_kv_heads <= 0 || text.num_attention_heads % g.num_kv_heads != 0)
      fail("{}: layer {}: num_attention_heads ({}) is not a multiple of its KV head count ({}, from {})", source, i,
           text.num_attention_heads, g.num_kv_heads,
           (g.k_eq_v && text.num_global_key_value_heads) ? "num_global_key_value_heads" : "num_key_value_heads");
    if (g.kv_donor) {
      g.kv_source = i;
      continue;
    }
    // Sharer: the last donor of the same type (docs/gemma4.md §2.4).
    g.kv_source = -1;
    for (int d = first_shared - 1; d >= 0; --d) {
      if (text.layer_types[static_cast<size_t>(d)] == g.type) {
        g.kv_source = d;
        break;
      }
    }
    if (g.kv_source < 0)
      fail("{}: layer {} ({}) shares KV (num_kv_shared_layers = {}) but no donor layer below {} has that type", source,
           i, layer_type_name(g.type), text.num_kv_shared_layers, first_shared);
  }
  return out;
}

}  // namespace

// ---- public ----------------------------------------------------------------------------------

bool TextConfig::needs_inference(const std::string& key) const {
  return std::find(keys_to_infer.begin(), keys_to_infer.end(), key) != keys_to_infer.end();
}

const char* layer_type_name(LayerType t) { return t == LayerType::Sliding ? "sliding_attention" : "full_attention"; }

QuantSpec QuantizationConfig::spec_for(const std::string& module_path) const {
  auto it = overrides.find(module_path);
  if (it == overrides.end()) return defaults;
  if (!it->second)
    fail("module '{}' is marked not quantized (false) in '{}' but was asked for its quantization", module_path,
         block_key.empty() ? "quantization" : block_key);
  return *it->second;
}

QuantizationConfig parse_quantization(const json& raw, const std::string& source) {
  QuantizationConfig q;
  if (!raw.is_object()) return q;
  const char* key = nullptr;
  for (const char* k : {"quantization", "quantization_config"}) {
    auto it = raw.find(k);
    if (it != raw.end() && !it->is_null()) {
      key = k;
      break;
    }
  }
  if (!key) return q;
  const json& block = raw.at(key);
  Reader top(raw, "", source);
  if (!block.is_object()) top.wrong_type(key, block, "an object");
  Reader r(block, std::string(key) + ".", source);
  if (auto qm = block.find("quant_method"); qm != block.end())
    fail("{}: '{}.quant_method' = {}: only MLX affine quantization ('{}' with bits/group_size) is supported", source,
         key, qm->dump(), key);
  q.present = true;
  q.block_key = key;
  if (!r.has("bits")) r.missing("bits");
  if (!r.has("group_size")) r.missing("group_size");
  read_quant_fields(r, q.defaults);
  for (auto it = block.begin(); it != block.end(); ++it) {
    const std::string& path = it.key();
    if (path == "bits" || path == "group_size" || path == "mode" || path == "superblock" || path == "code_bits")
      continue;
    const json& v = it.value();
    if (v.is_boolean() && !v.get<bool>()) {
      q.overrides[path] = std::nullopt;
    } else if (v.is_object()) {
      Reader ov(v, fmt::format("{}.\"{}\".", key, path), source);
      QuantSpec spec = q.defaults;  // missing fields inherit the top-level values
      read_quant_fields(ov, spec);
      q.overrides[path] = spec;
    } else {
      fail("{}: '{}.\"{}\"' must be an object with bits/group_size or false, got {}", source, key, path, v.dump());
    }
  }
  return q;
}

std::vector<LayerGeometry> derive_geometry(const TextConfig& text, const std::string& source) {
  return derive(text, source, TextRole::Target);
}

void update_target_geometry(TargetConfig& cfg) {
  cfg.layers = derive(cfg.text, cfg.source, TextRole::Target);
  cfg.first_shared_layer = cfg.text.num_hidden_layers - cfg.text.num_kv_shared_layers;
  cfg.last_sliding_donor = -1;
  cfg.last_full_donor = -1;
  for (const LayerGeometry& g : cfg.layers) {
    if (!g.kv_donor) continue;
    (g.type == LayerType::Sliding ? cfg.last_sliding_donor : cfg.last_full_donor) = g.index;
  }
}

TargetConfig parse_target_config(const json& raw, const std::string& source) {
  if (!raw.is_object()) fail("{}: config must be a JSON object", source);
  TargetConfig cfg;
  cfg.source = source;
  Reader top(raw, "", source);
  cfg.model_type = top.opt_string("model_type").value_or("");
  if (cfg.model_type.empty()) top.missing("model_type");
  static const std::set<std::string> kKnown = {"gemma4", "gemma4_unified", "gemma4_text", "gemma4_unified_text"};
  if (!kKnown.count(cfg.model_type))
    fail("{}: model_type \"{}\" is not a Gemma 4 target (gemma4, gemma4_unified, gemma4_text, gemma4_unified_text)",
         source, cfg.model_type);
  if (const json* a = top.find("architectures")) {
    if (!a->is_array()) top.wrong_type("architectures", *a, "a list of strings");
    for (const json& e : *a) {
      if (!e.is_string()) top.wrong_type("architectures", *a, "a list of strings");
      cfg.architectures.push_back(e.get<std::string>());
    }
  }
  // docs/gemma4.md §2.1: nested text_config for the multimodal wrappers, flat keys for text-only
  // configs.
  const json* tc = top.find("text_config");
  if (tc && !tc->is_object()) top.wrong_type("text_config", *tc, "an object");
  const bool nested = tc != nullptr;
  if (!nested && (cfg.model_type == "gemma4" || cfg.model_type == "gemma4_unified"))
    fail("{}: model_type \"{}\" needs a 'text_config' object", source, cfg.model_type);
  Reader text(nested ? *tc : raw, nested ? "text_config." : "", source);
  cfg.text = parse_text(text, TextRole::Target);
  if (nested && !cfg.text.model_type.empty() && cfg.text.model_type != "gemma4_text" &&
      cfg.text.model_type != "gemma4_unified_text")
    fail("{}: text_config.model_type \"{}\" is not gemma4_text / gemma4_unified_text", source, cfg.text.model_type);
  if (cfg.text.model_type.empty()) cfg.text.model_type = nested ? "gemma4_text" : cfg.model_type;
  resolve_vocab(cfg.text, text, top, nested);
  resolve_tie(cfg.text, text, top);
  // Token ids: text first, then top level (mlx-bun reads the top level first); the EOS set is the
  // union of both (docs/gemma4.md §2.5).
  if (auto b = text.opt_int("bos_token_id", 0))
    cfg.bos_token_id = static_cast<int>(*b);
  else if (auto b2 = top.opt_int("bos_token_id", 0))
    cfg.bos_token_id = static_cast<int>(*b2);
  if (auto p = text.opt_int("pad_token_id", 0))
    cfg.pad_token_id = static_cast<int>(*p);
  else if (auto p2 = top.opt_int("pad_token_id", 0))
    cfg.pad_token_id = static_cast<int>(*p2);
  append_unique(cfg.eos_token_ids, text.id_list("eos_token_id"));
  if (nested) append_unique(cfg.eos_token_ids, top.id_list("eos_token_id"));
  cfg.quantization = parse_quantization(raw, source);
  update_target_geometry(cfg);
  return cfg;
}

DrafterConfig parse_drafter_config(const json& raw, const std::string& source) {
  if (!raw.is_object()) fail("{}: config must be a JSON object", source);
  DrafterConfig cfg;
  cfg.source = source;
  Reader top(raw, "", source);
  cfg.model_type = top.opt_string("model_type").value_or("");
  if (cfg.model_type.empty()) top.missing("model_type");
  // Both spellings occur for the larger drafters and both are accepted; model_type does not decide
  // the head (docs/gemma4.md §7).
  if (cfg.model_type != "gemma4_assistant" && cfg.model_type != "gemma4_unified_assistant")
    fail("{}: model_type \"{}\" is not a Gemma 4 assistant drafter (gemma4_assistant, gemma4_unified_assistant)",
         source, cfg.model_type);
  cfg.backbone_hidden_size = top.req_int("backbone_hidden_size", 1);
  cfg.use_ordered_embeddings = top.opt_bool("use_ordered_embeddings");
  cfg.num_centroids = static_cast<int>(top.opt_int("num_centroids", 1).value_or(0));
  cfg.centroid_intermediate_top_k = static_cast<int>(top.opt_int("centroid_intermediate_top_k", 1).value_or(0));
  const json* tc = top.find("text_config");
  if (!tc) top.missing("text_config");
  if (!tc->is_object()) top.wrong_type("text_config", *tc, "an object");
  Reader text(*tc, "text_config.", source);
  cfg.text = parse_text(text, TextRole::Drafter);
  if (cfg.text.num_kv_shared_layers != cfg.text.num_hidden_layers)
    fail(
        "{}: 'text_config.num_kv_shared_layers' = {} must equal 'text_config.num_hidden_layers' = {}: a drafter "
        "owns no KV cache",
        source, cfg.text.num_kv_shared_layers, cfg.text.num_hidden_layers);
  if (cfg.text.enable_moe_block)
    fail("{}: 'text_config.enable_moe_block' is true: MoE drafters are not supported", source);
  if (cfg.text.hidden_size_per_layer_input != 0)
    fail("{}: 'text_config.hidden_size_per_layer_input' = {}: a drafter has no per-layer inputs", source,
         cfg.text.hidden_size_per_layer_input);
  resolve_vocab(cfg.text, text, top, true);
  resolve_tie(cfg.text, text, top);
  cfg.tie_word_embeddings = cfg.text.tie_word_embeddings;
  append_unique(cfg.eos_token_ids, text.id_list("eos_token_id"));
  append_unique(cfg.eos_token_ids, top.id_list("eos_token_id"));
  cfg.quantization = parse_quantization(raw, source);
  cfg.layers = derive(cfg.text, source, TextRole::Drafter);
  return cfg;
}

GenerationConfig parse_generation_config(const json& raw, const std::string& source) {
  if (!raw.is_object()) fail("{}: generation config must be a JSON object", source);
  Reader r(raw, "", source);
  GenerationConfig g;
  if (auto v = r.opt_int("bos_token_id", 0)) g.bos_token_id = static_cast<int>(*v);
  g.eos_token_ids = r.id_list("eos_token_id");
  if (auto v = r.opt_int("pad_token_id", 0)) g.pad_token_id = static_cast<int>(*v);
  g.do_sample = r.opt_bool("do_sample");
  g.temperature = r.opt_num("temperature");
  if (g.temperature && *g.temperature < 0) fail("{}: 'temperature' = {} must be >= 0", source, *g.temperature);
  if (auto v = r.opt_int("top_k", 0, int64_t{1} << 30)) g.top_k = static_cast<int>(*v);
  g.top_p = r.opt_num("top_p");
  if (g.top_p && !(*g.top_p >= 0 && *g.top_p <= 1)) fail("{}: 'top_p' = {} must be in [0, 1]", source, *g.top_p);
  g.min_p = r.opt_num("min_p");
  if (g.min_p && !(*g.min_p >= 0 && *g.min_p <= 1)) fail("{}: 'min_p' = {} must be in [0, 1]", source, *g.min_p);
  g.repetition_penalty = r.opt_num("repetition_penalty");
  if (g.repetition_penalty && !(*g.repetition_penalty > 0))
    fail("{}: 'repetition_penalty' = {} must be positive", source, *g.repetition_penalty);
  g.suppress_tokens = r.id_list("suppress_tokens");
  if (auto v = r.opt_int("num_assistant_tokens", 1, 1024)) g.num_assistant_tokens = static_cast<int>(*v);
  return g;
}

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read {}", path);
  const std::string text = ss.str();
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte is 1-based; turn it into line:column for the message.
    const size_t end = std::min(text.size(), e.byte > 0 ? static_cast<size_t>(e.byte - 1) : size_t{0});
    size_t line = 1, col = 1;
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    if (auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
    fail("{}:{}:{}: invalid JSON: {}", path, line, col, what);
  }
}

}  // namespace specula
