// Checkpoint directory -> validated modules (docs/gemma4.md §3, §7). Every tensor the config
// implies is looked up and shape-checked here, so a bad checkpoint fails at load with a message
// naming the tensor, the config key and both values, never in the middle of a generation.
#include "specula/io/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "specula/io/weight_files.h"
#include "specula/util/error.h"

namespace specula {

namespace fs = std::filesystem;

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The float types a weight may be stored in (F64 is not one).
bool is_weight_float(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

std::string file_of(const TensorView& t) { return t.file ? *t.file : std::string("?"); }

// One expected logical dimension and where the expectation comes from ("" = no config key).
struct Dim {
  int64_t value;
  std::string why;
};

std::vector<Dim> plain_dims(const std::vector<int64_t>& shape) {
  std::vector<Dim> out;
  for (int64_t v : shape) out.push_back({v, ""});
  return out;
}

std::vector<int64_t> values(const std::vector<Dim>& dims) {
  std::vector<int64_t> out;
  for (const Dim& d : dims) out.push_back(d.value);
  return out;
}

// The tensor holding a module's weight: `<path>.weight`, or the bare `<path>` (HF expert stacks
// such as `experts.gate_up_proj` carry no suffix).
const TensorView* find_weight(const TensorStore& store, const std::string& path) {
  if (const TensorView* w = store.find(path + ".weight")) return w;
  return store.find(path);
}

bool module_exists(const TensorStore& store, const std::string& path) {
  return find_weight(store, path) != nullptr || store.contains(path + ".scales");
}

[[noreturn]] void dim_mismatch(const TensorView& t, size_t axis, int64_t actual, const Dim& want) {
  if (want.why.empty())
    fail("tensor {} has shape {}: dim {} is {} but {} is expected ({})", t.name, t.shape_str(), axis, actual,
         want.value, file_of(t));
  fail("tensor {} has shape {}: dim {} is {} but {} = {} ({})", t.name, t.shape_str(), axis, actual, want.why,
       want.value, file_of(t));
}

std::string quant_key(const QuantizationConfig& q, const std::string& path) {
  const std::string block = q.block_key.empty() ? "quantization" : q.block_key;
  if (q.overrides.count(path)) return fmt::format("{}[\"{}\"]", block, path);
  return fmt::format("{}.bits/group_size", block);
}

ModuleRef resolve(const TensorStore& store, const QuantizationConfig& quant, const std::string& path,
                  const std::vector<Dim>& dims, const std::string& source) {
  ModuleRef m;
  m.path = path;
  m.shape = values(dims);
  const TensorView* scales = store.find(path + ".scales");
  const TensorView* biases = store.find(path + ".biases");
  const TensorView* weight = store.find(path + ".weight");
  if (!weight && !scales) weight = store.find(path);
  if (!weight) fail("missing tensor {}.weight (logical shape {}) in {}", path, shape_text(m.shape), store.dir());
  if (weight->shape.size() != dims.size())
    fail("tensor {} has shape {} but a {}-d tensor of logical shape {} is expected ({})", weight->name,
         weight->shape_str(), dims.size(), shape_text(m.shape), file_of(*weight));
  // Every dim but the input (last) one is stored unpacked in both forms.
  for (size_t a = 0; a + 1 < dims.size(); ++a)
    if (weight->shape[a] != dims[a].value) dim_mismatch(*weight, a, weight->shape[a], dims[a]);
  const size_t last = dims.size() - 1;
  const Dim& in = dims[last];
  m.weight = weight;

  if (!scales) {
    if (biases) fail("tensor {}.biases exists without {}.scales ({})", path, path, file_of(*biases));
    if (!is_weight_float(weight->dtype))
      fail("tensor {} is {} but there is no {}.scales tensor: a dense weight must be BF16, F16 or F32 ({})",
           weight->name, dtype_name(weight->dtype), path, file_of(*weight));
    if (weight->shape[last] != in.value) dim_mismatch(*weight, last, weight->shape[last], in);
    return m;
  }

  // Affine-quantized (docs/gemma4.md §4): quantized iff `.scales` exists; bits/group from config.
  const std::string block = quant.block_key.empty() ? "quantization" : quant.block_key;
  if (!quant.present)
    fail("tensor {} exists but {} has no 'quantization' block, so its bits and group size are unknown", scales->name,
         source);
  if (auto it = quant.overrides.find(path); it != quant.overrides.end() && !it->second)
    fail("tensor {} exists but {} marks the module as not quantized ({}[\"{}\"] = false)", scales->name, source, block,
         path);
  const QuantSpec spec = quant.spec_for(path);
  const std::string key = quant_key(quant, path);
  if (weight->dtype != DType::U32)
    fail("tensor {} is {} but quantized weights are packed U32 ({})", weight->name, dtype_name(weight->dtype),
         file_of(*weight));
  if (!biases) fail("missing tensor {}.biases (affine quantization needs scales and biases) in {}", path, store.dir());
  for (const TensorView* t : {scales, biases}) {
    if (!is_weight_float(t->dtype))
      fail("tensor {} is {}; scales and biases must be BF16, F16 or F32 ({})", t->name, dtype_name(t->dtype),
           file_of(*t));
    if (t->shape.size() != dims.size())
      fail("tensor {} has shape {} but {} has shape {} ({})", t->name, t->shape_str(), weight->name,
           weight->shape_str(), file_of(*t));
    for (size_t a = 0; a + 1 < dims.size(); ++a)
      if (t->shape[a] != dims[a].value) dim_mismatch(*t, a, t->shape[a], dims[a]);
  }
  if (biases->dtype != scales->dtype || biases->shape != scales->shape)
    fail("tensors {} ({} {}) and {} ({} {}) disagree ({})", scales->name, dtype_name(scales->dtype),
         scales->shape_str(), biases->name, dtype_name(biases->dtype), biases->shape_str(), file_of(*biases));

  const int64_t packed = weight->shape[last];
  const int64_t groups = scales->shape[last];
  const auto fits = [&](int64_t n, int bits, int gs) {
    return n % gs == 0 && (n * bits) % 32 == 0 && packed == n * bits / 32 && groups == n / gs;
  };
  if (fits(in.value, spec.bits, spec.group_size)) {
    m.quantized = true;
    m.quant = spec;
    m.scales = scales;
    m.biases = biases;
    return m;
  }
  std::vector<int64_t> want_w = values(dims), want_s = values(dims);
  const bool expressible = in.value % spec.group_size == 0 && (in.value * spec.bits) % 32 == 0;
  want_w[last] = in.value * spec.bits / 32;
  want_s[last] = in.value / spec.group_size;
  const auto wrong_quant = [&](const std::string& detail) {
    return fmt::format(
        "tensor {} has shape {} (scales {}) but {} in {} says bits {}, group_size {}, which for logical shape {} "
        "needs {} (scales {}){} ({})",
        weight->name, weight->shape_str(), scales->shape_str(), key, source, spec.bits, spec.group_size,
        shape_text(m.shape), expressible ? shape_text(want_w) : std::string("an input dim divisible by the group"),
        shape_text(want_s), detail, file_of(*weight));
  };
  // Decide whom to blame: the quantization config (the tensors fit the expected input dim with
  // other bits/group) or the logical dimension (the tensors agree on some other input width).
  for (int b : {2, 3, 4, 5, 6, 8})
    for (int g : {16, 32, 64, 128})
      if (fits(in.value, b, g))
        fail("{}", wrong_quant(fmt::format("; the tensors look like bits {}, group_size {}", b, g)));
  if ((packed * 32) % spec.bits == 0) {
    const int64_t n = packed * 32 / spec.bits;
    if (n == groups * spec.group_size && !in.why.empty())
      fail("tensor {} has shape {} (scales {}): at bits {}, group_size {} ({}) its input dim is {} but {} = {} ({})",
           weight->name, weight->shape_str(), scales->shape_str(), spec.bits, spec.group_size, key, n, in.why, in.value,
           file_of(*weight));
  }
  fail("{}", wrong_quant(""));
}

const TensorView& vector_tensor(const TensorStore& store, const std::string& name, const Dim& len) {
  const TensorView* t = store.find(name);
  if (!t) fail("missing tensor {} (length {}) in {}", name, len.value, store.dir());
  if (!is_weight_float(t->dtype))
    fail("tensor {} is {} but must be BF16, F16 or F32 ({})", t->name, dtype_name(t->dtype), file_of(*t));
  const bool scalar_ok = len.value == 1 && t->shape.empty();
  if (!scalar_ok) {
    if (t->shape.size() != 1)
      fail("tensor {} has shape {} but a vector of length {} is expected ({})", t->name, t->shape_str(), len.value,
           file_of(*t));
    if (t->shape[0] != len.value) dim_mismatch(*t, 0, t->shape[0], len);
  }
  return *t;
}

std::string join(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

std::optional<GenerationConfig> load_generation(const std::string& dir) {
  const std::string path = join(dir, "generation_config.json");
  if (!fs::exists(path)) return std::nullopt;
  return parse_generation_config(read_json_file(path), path);
}

// OptiQ's kv_config.json asks for a quantized KV cache per layer; specula's cache type is chosen
// for all layers by --kv-type, so the file is ignored, and said so once at load (docs/gemma4.md §6).
void note_ignored_kv_config(const std::string& dir) {
  std::error_code ec;
  const fs::path file = fs::path(dir) / "kv_config.json";
  if (!fs::is_regular_file(file, ec)) return;
  std::fprintf(stderr,
               "specula: note: %s (per-layer KV-cache precision) is ignored: the KV cache type is set by --kv-type\n",
               file.string().c_str());
  std::fflush(stderr);
}

void erase_key(TextConfig& t, const std::string& key) {
  auto& v = t.keys_to_infer;
  v.erase(std::remove(v.begin(), v.end(), key), v.end());
}

// "layer_scalar on every layer or on none" (docs/gemma4.md §3.2): collects presence per layer.
class LayerScalars {
 public:
  void add(int layer, const TensorView* t, const std::string& name) {
    if (t) {
      ++present_;
    } else if (first_missing_.empty()) {
      first_missing_ = name;
      first_missing_layer_ = layer;
    }
  }
  void check(const std::string& dir) const {
    if (present_ > 0 && !first_missing_.empty())
      fail(
          "missing tensor {} in {}: layer_scalar is present on {} other layer(s); it must be on every layer or on "
          "none (layer {})",
          first_missing_, dir, present_, first_missing_layer_);
  }

 private:
  int present_ = 0;
  std::string first_missing_;
  int first_missing_layer_ = -1;
};

const TensorView* optional_scalar(const TensorStore& store, const std::string& name) {
  if (!store.contains(name)) return nullptr;
  return &vector_tensor(store, name, {1, ""});
}

// Loads and checks the target tensors (docs/gemma4.md §3.2) against the parsed config.
class TargetLoader {
 public:
  TargetLoader(TargetCheckpoint& ck, bool nested) : ck_(ck), cfg_(ck.config), t_(ck.config.text), store_(ck.store) {
    kp_ = nested ? "text_config." : "";
  }

  void run() {
    infer_absent_keys();
    update_target_geometry(cfg_);
    check_layer_count();
    check_overrides();
    load_globals();
    LayerScalars scalars;
    for (const LayerGeometry& g : cfg_.layers) {
      ck_.layers.push_back(load_layer(g));
      scalars.add(g.index, ck_.layers.back().layer_scalar, layer(g.index) + "layer_scalar");
    }
    scalars.check(store_.dir());
  }

 private:
  std::string key(const char* k) const { return kp_ + k; }
  std::string key_val(const char* k, int64_t v) const { return fmt::format("{}{} ({})", kp_, k, v); }
  std::string layer(int i) const { return fmt::format("{}layers.{}.", ck_.prefix, i); }

  ModuleRef module(const std::string& path, std::vector<Dim> dims) {
    return resolve(store_, cfg_.quantization, path, dims, cfg_.source);
  }
  const TensorView* vec(const std::string& name, Dim len) { return &vector_tensor(store_, name, len); }

  [[noreturn]] void cannot_infer(const char* k, const std::string& why) {
    fail("{}: key '{}' is missing and cannot be inferred: {}", cfg_.source, key(k), why);
  }

  // The "inferred" keys of docs/gemma4.md §2.2, whose defaults differ across stacks.
  void infer_absent_keys() {
    const int nl = t_.num_hidden_layers;
    if (t_.needs_inference("hidden_size_per_layer_input")) {
      const TensorView* n = store_.find(ck_.prefix + "per_layer_projection_norm.weight");
      t_.hidden_size_per_layer_input = (n && n->shape.size() == 1) ? n->shape[0] : 0;
      if (!n && module_exists(store_, ck_.prefix + "embed_tokens_per_layer"))
        cannot_infer("hidden_size_per_layer_input",
                     "embed_tokens_per_layer exists but per_layer_projection_norm does not");
      erase_key(t_, "hidden_size_per_layer_input");
    }
    if (t_.needs_inference("vocab_size_per_layer_input")) {
      const TensorView* e = find_weight(store_, ck_.prefix + "embed_tokens_per_layer");
      t_.vocab_size_per_layer_input = (t_.hidden_size_per_layer_input > 0 && e && !e->shape.empty()) ? e->shape[0] : 0;
      erase_key(t_, "vocab_size_per_layer_input");
    }
    if (t_.needs_inference("global_head_dim")) {
      t_.global_head_dim = t_.head_dim;
      for (int i = 0; i < nl; ++i) {
        if (t_.layer_types[static_cast<size_t>(i)] != LayerType::Full) continue;
        const TensorView* q = store_.find(layer(i) + "self_attn.q_norm.weight");
        if (!q || q->shape.size() != 1)
          cannot_infer("global_head_dim", fmt::format("tensor {}self_attn.q_norm.weight is missing", layer(i)));
        t_.global_head_dim = static_cast<int>(q->shape[0]);
        break;
      }
      erase_key(t_, "global_head_dim");
    }
    if (t_.needs_inference("num_kv_shared_layers")) {
      int shared = 0;  // trailing layers without their own k_proj
      while (shared < nl && !module_exists(store_, layer(nl - 1 - shared) + "self_attn.k_proj")) ++shared;
      t_.num_kv_shared_layers = shared;
      erase_key(t_, "num_kv_shared_layers");
    }
    const int first_shared = nl - t_.num_kv_shared_layers;
    if (t_.needs_inference("attention_k_eq_v")) {
      bool any_full = false, any_v = false;
      for (int i = 0; i < first_shared; ++i) {
        if (t_.layer_types[static_cast<size_t>(i)] != LayerType::Full) continue;
        any_full = true;
        any_v = any_v || module_exists(store_, layer(i) + "self_attn.v_proj");
      }
      t_.attention_k_eq_v = any_full && !any_v;
      erase_key(t_, "attention_k_eq_v");
    }
    if (t_.needs_inference("enable_moe_block")) {
      t_.enable_moe_block = module_exists(store_, layer(0) + "router.proj");
      if (t_.enable_moe_block && t_.top_k_experts == 0)
        cannot_infer("top_k_experts", fmt::format("the checkpoint has MoE tensors ({}router.proj)", layer(0)));
      erase_key(t_, "enable_moe_block");
    }
    if (t_.enable_moe_block && (t_.num_experts == 0 || t_.moe_intermediate_size == 0)) {
      const TensorView* r = find_weight(store_, layer(0) + "router.proj");
      if (!r || r->shape.size() != 2) cannot_infer("num_experts", fmt::format("{}router.proj is missing", layer(0)));
      if (t_.num_experts == 0) t_.num_experts = static_cast<int>(r->shape[0]);
      if (t_.moe_intermediate_size == 0) {
        const TensorView* split = find_weight(store_, layer(0) + "experts.switch_glu.gate_proj");
        const TensorView* fused = find_weight(store_, layer(0) + "experts.gate_up_proj");
        if (split && split->shape.size() == 3)
          t_.moe_intermediate_size = split->shape[1];
        else if (fused && fused->shape.size() == 3)
          t_.moe_intermediate_size = fused->shape[1] / 2;
        else
          cannot_infer("moe_intermediate_size", fmt::format("no expert tensors on {}", layer(0)));
      }
      erase_key(t_, "num_experts");
      erase_key(t_, "moe_intermediate_size");
    }
    if (t_.needs_inference("use_double_wide_mlp")) {
      t_.use_double_wide_mlp = false;
      if (first_shared > 0 && first_shared < nl) {
        const TensorView* gp = find_weight(store_, layer(first_shared) + "mlp.gate_proj");
        t_.use_double_wide_mlp = gp && !gp->shape.empty() && gp->shape[0] == 2 * t_.intermediate_size;
      }
      erase_key(t_, "use_double_wide_mlp");
    }
    if (t_.needs_inference("tie_word_embeddings")) {
      t_.tie_word_embeddings = find_lm_head() == nullptr;
      erase_key(t_, "tie_word_embeddings");
    }
    if (!t_.keys_to_infer.empty())
      fail("{}: key '{}' is missing and could not be inferred", cfg_.source, key(t_.keys_to_infer.front().c_str()));
  }

  const char* find_lm_head() const {
    for (const char* p : {"lm_head", "language_model.lm_head", "model.lm_head"})
      if (module_exists(store_, p)) return p;
    return nullptr;
  }

  void check_layer_count() {
    const std::string extra = layer(t_.num_hidden_layers) + "input_layernorm.weight";
    if (store_.contains(extra))
      fail("tensor {} exists but {} says {} = {} ({})", extra, cfg_.source, key("num_hidden_layers"),
           t_.num_hidden_layers, store_.dir());
  }

  // An override for a module of this model that names no tensor is a typo or a renamed key (e.g. a
  // converter renamed the prefix; docs/gemma4.md §4): every later lookup would silently use the
  // defaults.
  void check_overrides() {
    for (const auto& [path, spec] : cfg_.quantization.overrides) {
      if (path.rfind(ck_.prefix, 0) != 0) continue;
      if (!module_exists(store_, path))
        fail("{}: {}[\"{}\"] names no module in the checkpoint {}", cfg_.source, cfg_.quantization.block_key, path,
             store_.dir());
    }
  }

  void load_globals() {
    const int64_t h = t_.hidden_size, v = t_.vocab_size;
    const Dim hd{h, key("hidden_size")};
    const Dim vd{v, key("vocab_size")};
    ck_.embed_tokens = module(ck_.prefix + "embed_tokens", {vd, hd});
    ck_.final_norm = vec(ck_.prefix + "norm.weight", hd);
    if (!t_.tie_word_embeddings) {
      const char* p = find_lm_head();
      if (!p)
        fail("{}: {} is false but there is no lm_head tensor (lm_head.weight or language_model.lm_head.weight) in {}",
             cfg_.source, key("tie_word_embeddings"), store_.dir());
      ck_.lm_head = module(p, {vd, hd});
    }
    const int64_t w = t_.hidden_size_per_layer_input;
    if (w > 0) {
      const Dim wd{w, key("hidden_size_per_layer_input")};
      const Dim packed{t_.num_hidden_layers * w,
                       fmt::format("{} × {}", key_val("num_hidden_layers", t_.num_hidden_layers),
                                   key_val("hidden_size_per_layer_input", w))};
      ck_.embed_tokens_per_layer = module(ck_.prefix + "embed_tokens_per_layer",
                                          {{t_.vocab_size_per_layer_input, key("vocab_size_per_layer_input")}, packed});
      ck_.per_layer_model_projection = module(ck_.prefix + "per_layer_model_projection", {packed, hd});
      ck_.per_layer_projection_norm = vec(ck_.prefix + "per_layer_projection_norm.weight", wd);
    } else {
      for (const std::string& p : {ck_.prefix + "embed_tokens_per_layer", layer(0) + "per_layer_input_gate"})
        if (module_exists(store_, p))
          fail("tensor {} exists but {} says {} = 0 (no per-layer inputs)", p, cfg_.source,
               key("hidden_size_per_layer_input"));
    }
  }

  TargetLayerModules load_layer(const LayerGeometry& g) {
    TargetLayerModules m;
    const std::string L = layer(g.index);
    const int64_t h = t_.hidden_size, nh = t_.num_attention_heads, d = g.head_dim;
    const bool full = g.type == LayerType::Full && t_.global_head_dim > 0;
    const char* dkey = full ? "global_head_dim" : "head_dim";
    const Dim hd{h, key("hidden_size")};
    const Dim dd{d, key(dkey)};
    const Dim qd{nh * d, fmt::format("{} × {}", key_val("num_attention_heads", nh), key_val(dkey, d))};

    m.q_proj = module(L + "self_attn.q_proj", {qd, hd});
    m.q_norm = vec(L + "self_attn.q_norm.weight", dd);
    m.o_proj = module(L + "self_attn.o_proj", {hd, qd});
    if (g.kv_donor) {
      const bool global_kv = g.k_eq_v && t_.num_global_key_value_heads.has_value();
      const char* kv_key = global_kv ? "num_global_key_value_heads" : "num_key_value_heads";
      const Dim kvd{g.num_kv_heads * d, fmt::format("{} × {}", key_val(kv_key, g.num_kv_heads), key_val(dkey, d))};
      if (!module_exists(store_, L + "self_attn.k_proj"))
        fail(
            "missing tensor {}self_attn.k_proj.weight in {}: layer {} owns a KV cache ({} = {}, so layers below {} "
            "are donors)",
            L, store_.dir(), g.index, key("num_kv_shared_layers"), t_.num_kv_shared_layers, cfg_.first_shared_layer);
      m.k_proj = module(L + "self_attn.k_proj", {kvd, hd});
      m.k_norm = vec(L + "self_attn.k_norm.weight", dd);
      const bool has_v = module_exists(store_, L + "self_attn.v_proj");
      if (g.k_eq_v && has_v)
        fail("tensor {}self_attn.v_proj exists but {} is true, so full-attention layer {} must not have one ({})", L,
             key("attention_k_eq_v"), g.index, store_.dir());
      if (!g.k_eq_v) m.v_proj = module(L + "self_attn.v_proj", {kvd, hd});
    }
    // KV-shared layers' k/v tensors, if a checkpoint has them, are unused (docs/gemma4.md §3.1).

    m.input_layernorm = vec(L + "input_layernorm.weight", hd);
    m.post_attention_layernorm = vec(L + "post_attention_layernorm.weight", hd);
    m.pre_feedforward_layernorm = vec(L + "pre_feedforward_layernorm.weight", hd);
    m.post_feedforward_layernorm = vec(L + "post_feedforward_layernorm.weight", hd);
    m.layer_scalar = optional_scalar(store_, L + "layer_scalar");

    // MLP width comes from the config and is checked against the tensor (docs/gemma4.md §2.4).
    const bool wide = g.mlp_width != t_.intermediate_size;
    const bool sharer = !g.kv_donor && cfg_.first_shared_layer > 0;
    std::string mwhy = key("intermediate_size");
    if (wide)
      mwhy = fmt::format("{} × 2 ({} on KV-shared layer {})", key_val("intermediate_size", t_.intermediate_size),
                         key("use_double_wide_mlp"), g.index);
    else if (sharer)
      mwhy = fmt::format("{} (with {} false on KV-shared layer {})", key("intermediate_size"),
                         key("use_double_wide_mlp"), g.index);
    const Dim md{g.mlp_width, mwhy};
    m.gate_proj = module(L + "mlp.gate_proj", {md, hd});
    m.up_proj = module(L + "mlp.up_proj", {md, hd});
    m.down_proj = module(L + "mlp.down_proj", {hd, md});

    const int64_t w = t_.hidden_size_per_layer_input;
    if (w > 0) {
      const Dim wd{w, key("hidden_size_per_layer_input")};
      m.per_layer_input_gate = module(L + "per_layer_input_gate", {wd, hd});
      m.per_layer_projection = module(L + "per_layer_projection", {hd, wd});
      m.post_per_layer_input_norm = vec(L + "post_per_layer_input_norm.weight", hd);
    }

    if (t_.enable_moe_block) {
      load_moe(m, L, hd);
    } else if (module_exists(store_, L + "router.proj")) {
      fail("tensor {}router.proj exists but {} is false ({})", L, key("enable_moe_block"), cfg_.source);
    }
    return m;
  }

  void load_moe(TargetLayerModules& m, const std::string& L, const Dim& hd) {
    const Dim ed{t_.num_experts, key("num_experts")};
    const Dim id{t_.moe_intermediate_size, key("moe_intermediate_size")};
    m.router_proj = module(L + "router.proj", {ed, hd});
    m.router_scale = vec(L + "router.scale", hd);
    m.router_per_expert_scale = vec(L + "router.per_expert_scale", ed);
    if (module_exists(store_, L + "experts.switch_glu.gate_proj")) {  // MLX split form
      m.experts_gate = module(L + "experts.switch_glu.gate_proj", {ed, id, hd});
      m.experts_up = module(L + "experts.switch_glu.up_proj", {ed, id, hd});
      m.experts_down = module(L + "experts.switch_glu.down_proj", {ed, hd, id});
    } else if (module_exists(store_, L + "experts.gate_up_proj")) {  // HF fused form
      const Dim id2{2 * t_.moe_intermediate_size,
                    fmt::format("2 × {}", key_val("moe_intermediate_size", t_.moe_intermediate_size))};
      m.experts_gate_up = module(L + "experts.gate_up_proj", {ed, id2, hd});
      m.experts_down = module(L + "experts.down_proj", {ed, hd, id});
    } else {
      fail(
          "missing expert tensors for {}: neither {}experts.switch_glu.gate_proj.weight nor {}experts.gate_up_proj "
          "exists in {} ({} is true)",
          L.substr(0, L.size() - 1), L, L, store_.dir(), key("enable_moe_block"));
    }
    m.pre_feedforward_layernorm_2 = vec(L + "pre_feedforward_layernorm_2.weight", hd);
    m.post_feedforward_layernorm_1 = vec(L + "post_feedforward_layernorm_1.weight", hd);
    m.post_feedforward_layernorm_2 = vec(L + "post_feedforward_layernorm_2.weight", hd);
  }

  TargetCheckpoint& ck_;
  TargetConfig& cfg_;
  TextConfig& t_;
  const TensorStore& store_;
  std::string kp_;
};

// docs/gemma4.md §3.1: the prefix whose embed_tokens.weight exists.
std::string detect_prefix(const TensorStore& store) {
  static const char* kPrefixes[] = {"language_model.model.", "model.", "model.language_model."};
  std::vector<std::string> found;
  for (const char* p : kPrefixes)
    if (store.contains(std::string(p) + "embed_tokens.weight")) found.emplace_back(p);
  if (found.empty())
    fail("no embed_tokens.weight under any known prefix (language_model.model., model., model.language_model.) in {}",
         store.dir());
  if (found.size() > 1)
    fail("ambiguous tensor prefix in {}: both {}embed_tokens.weight and {}embed_tokens.weight exist", store.dir(),
         found[0], found[1]);
  return found[0];
}

// token_ordering must be a permutation of [0, V) (docs/gemma4.md §3.3); data-less stores skip
// the values.
void check_permutation(const TensorView& t, int64_t vocab) {
  if (!t.data) return;
  std::vector<uint8_t> seen(static_cast<size_t>(vocab), 0);
  const size_t width = dtype_size(t.dtype);
  for (int64_t i = 0; i < vocab; ++i) {
    int64_t id = 0;
    if (t.dtype == DType::I64) {
      std::memcpy(&id, t.data + i * 8, 8);
    } else {
      int32_t v32 = 0;
      std::memcpy(&v32, t.data + i * static_cast<int64_t>(width), 4);
      id = v32;
    }
    if (id < 0 || id >= vocab)
      fail("tensor {}: entry {} = {} is outside [0, vocab_size = {}) ({})", t.name, i, id, vocab, file_of(t));
    if (seen[static_cast<size_t>(id)]++)
      fail("tensor {}: id {} appears twice (entry {}), so it is not a permutation of the vocabulary ({})", t.name, id,
           i, file_of(t));
  }
}

// Resolves and checks the drafter tensors of docs/gemma4.md §3.3 into `ck` (config already parsed).
void load_drafter_tensors(DrafterCheckpoint& ck, const std::string& cfg_path) {
  DrafterConfig& cfg = ck.config;
  TextConfig& t = cfg.text;
  const TensorStore& store = ck.store;
  const auto module = [&](const std::string& path, std::vector<Dim> dims) {
    return resolve(store, cfg.quantization, path, dims, cfg_path);
  };
  const auto vec = [&](const std::string& name, Dim len) { return &vector_tensor(store, name, len); };

  // Absent keys, inferred (docs/gemma4.md §2.2): global_head_dim from the full layer's q_norm,
  // tie from lm_head.
  if (t.needs_inference("global_head_dim")) {
    t.global_head_dim = t.head_dim;
    for (const LayerGeometry& g : cfg.layers) {
      if (g.type != LayerType::Full) continue;
      const std::string name = fmt::format("model.layers.{}.self_attn.q_norm.weight", g.index);
      const TensorView* q = store.find(name);
      if (!q || q->shape.size() != 1)
        fail("{}: key 'text_config.global_head_dim' is missing and cannot be inferred: tensor {} is missing", cfg_path,
             name);
      t.global_head_dim = static_cast<int>(q->shape[0]);
      break;
    }
    erase_key(t, "global_head_dim");
  }
  for (LayerGeometry& g : cfg.layers) g.head_dim = g.type == LayerType::Full ? t.global_head_dim : t.head_dim;
  if (t.needs_inference("tie_word_embeddings")) {
    t.tie_word_embeddings = !module_exists(store, "lm_head");
    erase_key(t, "tie_word_embeddings");
  }
  cfg.tie_word_embeddings = t.tie_word_embeddings;
  if (!t.keys_to_infer.empty())
    fail("{}: key 'text_config.{}' is missing and could not be inferred", cfg_path, t.keys_to_infer.front());

  const int64_t h = t.hidden_size, hb = cfg.backbone_hidden_size, v = t.vocab_size, nh = t.num_attention_heads;
  const Dim hd{h, "text_config.hidden_size"};
  const Dim hbd{hb, "backbone_hidden_size"};
  const Dim vd{v, "text_config.vocab_size"};
  // pre_projection is [h, 2·H_b]; its input is concat(target embedding, target hidden)
  // (docs/gemma4.md §7).
  ck.pre_projection = module("pre_projection", {hd, {2 * hb, fmt::format("2 × backbone_hidden_size ({})", hb)}});
  ck.post_projection = module("post_projection", {hbd, hd});
  ck.embed_tokens = module("model.embed_tokens", {vd, hd});
  ck.final_norm = vec("model.norm.weight", hd);
  if (!t.tie_word_embeddings) ck.lm_head = module("lm_head", {vd, hd});

  LayerScalars scalars;
  const Dim md{t.intermediate_size, "text_config.intermediate_size"};
  for (const LayerGeometry& g : cfg.layers) {
    DrafterLayerModules m;
    const std::string L = fmt::format("model.layers.{}.", g.index);
    const char* dkey = g.type == LayerType::Full ? "text_config.global_head_dim" : "text_config.head_dim";
    const Dim dd{g.head_dim, dkey};
    const Dim qd{nh * g.head_dim, fmt::format("text_config.num_attention_heads ({}) × {} ({})", nh, dkey, g.head_dim)};
    m.q_proj = module(L + "self_attn.q_proj", {qd, hd});
    m.q_norm = vec(L + "self_attn.q_norm.weight", dd);
    m.o_proj = module(L + "self_attn.o_proj", {hd, qd});
    m.input_layernorm = vec(L + "input_layernorm.weight", hd);
    m.post_attention_layernorm = vec(L + "post_attention_layernorm.weight", hd);
    m.pre_feedforward_layernorm = vec(L + "pre_feedforward_layernorm.weight", hd);
    m.post_feedforward_layernorm = vec(L + "post_feedforward_layernorm.weight", hd);
    m.gate_proj = module(L + "mlp.gate_proj", {md, hd});
    m.up_proj = module(L + "mlp.up_proj", {md, hd});
    m.down_proj = module(L + "mlp.down_proj", {hd, md});
    m.layer_scalar = optional_scalar(store, L + "layer_scalar");
    scalars.add(g.index, m.layer_scalar, L + "layer_scalar");
    ck.layers.push_back(std::move(m));
  }
  scalars.check(store.dir());

  // Head choice (docs/gemma4.md §7): the flag, else presence of the centroid tensors.
  const bool has_centroids = module_exists(store, "masked_embedding.centroids");
  ck.centroid_head = cfg.use_ordered_embeddings.value_or(has_centroids);
  if (ck.centroid_head) {
    if (!has_centroids)
      fail("{}: use_ordered_embeddings is true but tensor masked_embedding.centroids.weight is missing in {}", cfg_path,
           store.dir());
    if (cfg.num_centroids == 0) {  // not in the config: the centroid table says
      const TensorView* c = find_weight(store, "masked_embedding.centroids");
      if (!c || c->shape.size() != 2) fail("tensor masked_embedding.centroids.weight must be 2-d ({})", store.dir());
      cfg.num_centroids = static_cast<int>(c->shape[0]);
    }
    const int64_t c = cfg.num_centroids;
    if (c <= 0 || v % c != 0)
      fail("{}: vocab_size {} is not a multiple of num_centroids {}: the centroid head needs V/C tokens per cluster",
           cfg_path, v, c);
    if (cfg.centroid_intermediate_top_k <= 0 || cfg.centroid_intermediate_top_k > c)
      fail("{}: centroid_intermediate_top_k {} must be in [1, num_centroids = {}] for the centroid head", cfg_path,
           cfg.centroid_intermediate_top_k, c);
    ck.centroids = module("masked_embedding.centroids", {{c, "num_centroids"}, hd});
    const TensorView* ord = store.find("masked_embedding.token_ordering");
    if (!ord)
      fail("{}: use_ordered_embeddings is true but tensor masked_embedding.token_ordering is missing in {}", cfg_path,
           store.dir());
    if (ord->dtype != DType::I64 && ord->dtype != DType::I32)
      fail("tensor {} is {} but must be I64 or I32 ({})", ord->name, dtype_name(ord->dtype), file_of(*ord));
    if (ord->shape.size() != 1 || ord->shape[0] != v)
      fail("tensor {} has shape {} but text_config.vocab_size = {} ({})", ord->name, ord->shape_str(), v,
           file_of(*ord));
    check_permutation(*ord, v);
    ck.token_ordering = ord;
  }
}

}  // namespace

// ---- public ----------------------------------------------------------------------------------

DType ModuleRef::dtype() const {
  if (quantized && scales) return scales->dtype;
  return weight ? weight->dtype : DType::F32;
}

uint64_t ModuleRef::nbytes() const {
  uint64_t n = 0;
  for (const TensorView* t : {weight, scales, biases})
    if (t) n += t->nbytes;
  return n;
}

ModuleRef resolve_module(const TensorStore& store, const QuantizationConfig& quant, const std::string& path,
                         const std::vector<int64_t>& expected_shape) {
  return resolve(store, quant, path, plain_dims(expected_shape), fs::path(store.dir()).append("config.json").string());
}

const TensorView& resolve_vector(const TensorStore& store, const std::string& name, int64_t length) {
  return vector_tensor(store, name, {length, ""});
}

TargetCheckpoint load_target(const nlohmann::json& config, const std::string& config_source, TensorStore store) {
  TargetCheckpoint ck;
  ck.dir = store.dir();
  ck.config = parse_target_config(config, config_source);
  ck.store = std::move(store);
  ck.prefix = detect_prefix(ck.store);
  const bool nested = config.contains("text_config") && config["text_config"].is_object();
  TargetLoader(ck, nested).run();
  return ck;
}

TargetCheckpoint load_target(const std::string& path) {
  const std::string dir = model_files_dir(path);
  const std::string cfg_path = join(dir, "config.json");
  const nlohmann::json raw = read_json_file(cfg_path);
  parse_target_config(raw, cfg_path);  // config errors first, before any tensor file is opened
  std::optional<GenerationConfig> generation = load_generation(dir);
  note_ignored_kv_config(dir);
  TargetCheckpoint ck = load_target(raw, cfg_path, open_weights(path));
  ck.dir = dir;
  ck.generation = std::move(generation);
  return ck;
}

DrafterCheckpoint load_drafter(const std::string& path) {
  const std::string dir = model_files_dir(path);
  const std::string cfg_path = join(dir, "config.json");
  const nlohmann::json raw = read_json_file(cfg_path);
  parse_drafter_config(raw, cfg_path);  // config errors first, before any tensor file is opened
  std::optional<GenerationConfig> generation = load_generation(dir);
  DrafterCheckpoint ck = load_drafter(raw, cfg_path, open_weights(path));
  ck.dir = dir;
  ck.generation = std::move(generation);
  return ck;
}

DrafterCheckpoint load_drafter(const nlohmann::json& config, const std::string& config_source, TensorStore store) {
  DrafterCheckpoint ck;
  ck.dir = store.dir();
  ck.config = parse_drafter_config(config, config_source);
  ck.store = std::move(store);
  load_drafter_tensors(ck, config_source);
  return ck;
}

std::vector<std::string> check_drafter_compat(const TargetConfig& target, const DrafterConfig& drafter) {
  std::vector<std::string> problems;
  const TextConfig& tt = target.text;
  const TextConfig& dt = drafter.text;
  if (drafter.backbone_hidden_size != tt.hidden_size)
    problems.push_back(fmt::format("drafter backbone_hidden_size = {} ({}) but target hidden_size = {} ({})",
                                   drafter.backbone_hidden_size, drafter.source, tt.hidden_size, target.source));
  if (dt.vocab_size != tt.vocab_size)
    problems.push_back(fmt::format("drafter vocab_size = {} ({}) but target vocab_size = {} ({})", dt.vocab_size,
                                   drafter.source, tt.vocab_size, target.source));
  if (dt.sliding_window != tt.sliding_window)
    problems.push_back(fmt::format("drafter sliding_window = {} ({}) but target sliding_window = {} ({})",
                                   dt.sliding_window, drafter.source, tt.sliding_window, target.source));
  // Each drafter layer reads the target's last donor of its type (docs/gemma4.md §7).
  for (LayerType type : {LayerType::Sliding, LayerType::Full}) {
    const bool used = std::find(dt.layer_types.begin(), dt.layer_types.end(), type) != dt.layer_types.end();
    if (!used) continue;
    const bool sliding = type == LayerType::Sliding;
    const int donor = sliding ? target.last_sliding_donor : target.last_full_donor;
    if (donor < 0 || donor >= static_cast<int>(target.layers.size())) {
      problems.push_back(fmt::format("the drafter has {} layers but the target has no {} KV donor layer ({})",
                                     layer_type_name(type), layer_type_name(type), target.source));
      continue;
    }
    const LayerGeometry& g = target.layers[static_cast<size_t>(donor)];
    const char* dkey = sliding ? "head_dim" : "global_head_dim";
    const int ddim = sliding ? dt.head_dim : (dt.global_head_dim > 0 ? dt.global_head_dim : dt.head_dim);
    if (ddim != g.head_dim)
      problems.push_back(
          fmt::format("drafter {} = {} ({}) but the target's last {} donor layer {} has head dim {} ({})", dkey, ddim,
                      drafter.source, layer_type_name(type), donor, g.head_dim, target.source));
    if (g.num_kv_heads <= 0 || dt.num_attention_heads % g.num_kv_heads != 0)
      problems.push_back(fmt::format(
          "drafter num_attention_heads = {} ({}) is not a multiple of the {} KV heads of the "
          "target's last {} donor layer {} ({})",
          dt.num_attention_heads, drafter.source, g.num_kv_heads, layer_type_name(type), donor, target.source));
    // q and the donor's cached K must be rotated in the same frame.
    const RopeParams& dr = sliding ? dt.rope_sliding : dt.rope_full;
    if (dr.type != g.rope.type || dr.theta != g.rope.theta ||
        dr.partial_rotary_factor != g.rope.partial_rotary_factor || dr.factor != g.rope.factor)
      problems.push_back(fmt::format(
          "drafter rope_parameters.{} (type {}, theta {}, partial_rotary_factor {}, factor {}) ({}) differ from the "
          "target's (type {}, theta {}, partial_rotary_factor {}, factor {}) ({})",
          layer_type_name(type), dr.type, dr.theta, dr.partial_rotary_factor, dr.factor, drafter.source, g.rope.type,
          g.rope.theta, g.rope.partial_rotary_factor, g.rope.factor, target.source));
  }
  return problems;
}

}  // namespace specula
