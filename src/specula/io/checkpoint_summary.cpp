#include "specula/io/checkpoint_summary.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "specula/io/towers.h"
#include "specula/util/progress.h"

namespace specula {

namespace {

std::string lower_dtype(DType t) {
  std::string s(dtype_name(t));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

uint64_t numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (auto d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// "layers.12.self_attn.q_proj" -> "self_attn.q_proj" (after the prefix is removed).
std::string module_kind(std::string path, const std::string& prefix) {
  if (!prefix.empty() && path.rfind(prefix, 0) == 0) path = path.substr(prefix.size());
  if (path.rfind("layers.", 0) == 0) {
    size_t i = 7;
    while (i < path.size() && std::isdigit(static_cast<unsigned char>(path[i]))) ++i;
    if (i > 7 && i < path.size() && path[i] == '.') path = path.substr(i + 1);
  }
  return path;
}

struct StorageTally {
  std::vector<StorageGroup> groups;  // text tensors
  std::vector<StorageGroup> towers;  // tower tensors, by tower and format
  uint64_t parameters = 0;           // all
  uint64_t tower_parameters = 0;
  uint64_t tensor_bytes = 0;  // all
  uint64_t tower_bytes = 0;
};

// Tower tensors are tallied per tower (docs/gemma4.md §3.4): their module kinds would only
// lengthen the table, and no byte of them is streamed.
void tally_tower_tensor(const TensorView& t, const std::string& tower, std::map<std::string, StorageGroup>& towers,
                        StorageTally& out) {
  const std::string format = lower_dtype(t.dtype);
  StorageGroup& g = towers[tower + "/" + format];
  g.kind = tower;
  g.format = format;
  g.count += 1;
  g.bytes += t.nbytes;
  const uint64_t params = is_float_dtype(t.dtype) ? numel(t.shape) : 0;
  g.parameters += params;
  out.parameters += params;
  out.tower_parameters += params;
  out.tower_bytes += t.nbytes;
}

// Groups every tensor of a store by (module kind, storage format). A module is quantized iff its
// `.scales` tensor exists (docs/gemma4.md §4); its bits come from the config.
StorageTally tally_storage(const TensorStore& store, const QuantizationConfig& quant, const std::string& prefix) {
  struct Module {
    const TensorView* weight = nullptr;
    const TensorView* scales = nullptr;
    const TensorView* biases = nullptr;
  };
  std::map<std::string, Module> modules;
  std::map<std::string, StorageGroup> towers;
  StorageTally out;
  for (const std::string& name : store.names()) {
    const TensorView& t = store.get(name);
    out.tensor_bytes += t.nbytes;
    if (const std::string tower = tower_of(name); !tower.empty()) {
      tally_tower_tensor(t, tower, towers, out);
    } else if (name.ends_with(".scales")) {
      modules[name.substr(0, name.size() - 7)].scales = &t;
    } else if (name.ends_with(".biases")) {
      modules[name.substr(0, name.size() - 7)].biases = &t;
    } else if (name.ends_with(".weight")) {
      modules[name.substr(0, name.size() - 7)].weight = &t;
    } else {
      modules[name].weight = &t;
    }
  }
  std::map<std::pair<std::string, std::string>, StorageGroup> groups;
  for (const auto& [path, m] : modules) {
    StorageGroup g;
    uint64_t params = 0, bytes = 0;
    for (const TensorView* t : {m.weight, m.scales, m.biases}) {
      if (t) bytes += t->nbytes;
    }
    if (m.scales && m.weight && !m.weight->shape.empty()) {
      QuantSpec spec = quant.defaults;
      try {
        spec = quant.spec_for(path);
      } catch (const std::exception&) {
        // The loader rejects such a checkpoint; a summary of a validated one never gets here.
      }
      g.kind = module_kind(path, prefix);
      g.format = fmt::format("q{}g{}", spec.bits, spec.group_size);
      std::vector<int64_t> logical = m.weight->shape;
      logical.back() = logical.back() * 32 / spec.bits;
      params = numel(logical);
    } else {
      const TensorView* t = m.weight ? m.weight : (m.scales ? m.scales : m.biases);
      g.format = lower_dtype(t->dtype);
      if (is_float_dtype(t->dtype)) params = numel(t->shape);
      g.kind = (t->shape.size() <= 1 && is_float_dtype(t->dtype)) ? std::string("1-d vectors (norms, scalars)")
                                                                  : module_kind(path, prefix);
    }
    StorageGroup& acc = groups[{g.kind, g.format}];
    acc.kind = g.kind;
    acc.format = g.format;
    acc.count += 1;
    acc.parameters += params;
    acc.bytes += bytes;
    out.parameters += params;
  }
  for (auto& [key, g] : groups) out.groups.push_back(g);
  for (auto& [key, g] : towers) out.towers.push_back(g);
  return out;
}

uint64_t vbytes(const TensorView* t) { return t ? t->nbytes : 0; }

// The bytes of a checkpoint's files: a GGUF checkpoint's .gguf file (its `dir`), not the image
// its store maps.
uint64_t bytes_on_disk(const std::string& dir, GgufImageSource image, const TensorStore& store) {
  if (image == GgufImageSource::None) return store.total_bytes();
  std::error_code ec;
  const uintmax_t n = std::filesystem::file_size(dir, ec);
  return ec ? store.total_bytes() : static_cast<uint64_t>(n);
}

// One row of a [rows, ...] table, in stored bytes (weight + scales + biases).
uint64_t row_bytes(const ModuleRef& m) {
  return m.shape.empty() || m.shape[0] == 0 ? 0 : m.nbytes() / static_cast<uint64_t>(m.shape[0]);
}

uint64_t target_bytes_per_token(const TargetCheckpoint& ck) {
  const TextConfig& t = ck.config.text;
  uint64_t n = 0;
  if (ck.lm_head) {
    n += ck.lm_head->nbytes() + row_bytes(ck.embed_tokens);
  } else {
    n += ck.embed_tokens.nbytes();  // tied head: the whole table (covers the input row too)
  }
  n += vbytes(ck.final_norm);
  if (ck.embed_tokens_per_layer) n += row_bytes(*ck.embed_tokens_per_layer);
  if (ck.per_layer_model_projection) n += ck.per_layer_model_projection->nbytes();
  n += vbytes(ck.per_layer_projection_norm);
  const auto opt = [](const std::optional<ModuleRef>& m) { return m ? m->nbytes() : uint64_t{0}; };
  // Only top_k of the stacked experts are read per token.
  const auto experts = [&](const std::optional<ModuleRef>& m) {
    if (!m || m->shape.empty() || m->shape[0] == 0) return uint64_t{0};
    return m->nbytes() / static_cast<uint64_t>(m->shape[0]) * static_cast<uint64_t>(t.top_k_experts);
  };
  for (const TargetLayerModules& L : ck.layers) {
    n += L.q_proj.nbytes() + L.o_proj.nbytes() + opt(L.k_proj) + opt(L.v_proj);
    n += L.gate_proj.nbytes() + L.up_proj.nbytes() + L.down_proj.nbytes();
    n += opt(L.per_layer_input_gate) + opt(L.per_layer_projection) + opt(L.router_proj);
    n += experts(L.experts_gate) + experts(L.experts_up) + experts(L.experts_gate_up) + experts(L.experts_down);
    for (const TensorView* v :
         {L.q_norm, L.k_norm, L.input_layernorm, L.post_attention_layernorm, L.pre_feedforward_layernorm,
          L.post_feedforward_layernorm, L.layer_scalar, L.post_per_layer_input_norm, L.router_scale,
          L.router_per_expert_scale, L.pre_feedforward_layernorm_2, L.post_feedforward_layernorm_1,
          L.post_feedforward_layernorm_2}) {
      n += vbytes(v);
    }
  }
  return n;
}

std::string rope_text(const RopeParams& r) {
  std::string s = fmt::format("{} theta={:g}", r.type, r.theta);
  if (r.partial_rotary_factor != 1.0) s += fmt::format(" partial={:g}", r.partial_rotary_factor);
  if (r.factor != 1.0) s += fmt::format(" factor={:g}", r.factor);
  return s;
}

// "3, 5-9, 12"
std::string ranges_text(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return out;
}

std::string count_text(uint64_t n) {
  if (n >= 1'000'000'000ull) return fmt::format("{:.3f} B", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000ull) return fmt::format("{:.2f} M", static_cast<double>(n) / 1e6);
  if (n >= 1'000ull) return fmt::format("{:.1f} K", static_cast<double>(n) / 1e3);
  return fmt::format("{}", n);
}

void storage_table(std::string& out, const std::vector<StorageGroup>& groups) {
  size_t kw = 4;
  for (const auto& g : groups) kw = std::max(kw, g.kind.size());
  out += fmt::format("  {:<{}}  {:<7} {:>7} {:>14} {:>12}\n", "kind", kw, "format", "count", "parameters", "bytes");
  for (const auto& g : groups) {
    out += fmt::format("  {:<{}}  {:<7} {:>7} {:>14} {:>12}\n", g.kind, kw, g.format, g.count, g.parameters,
                       format_bytes(g.bytes));
  }
}

int tower_tensor_count(const std::vector<StorageGroup>& towers) {
  int n = 0;
  for (const auto& g : towers) n += g.count;
  return n;
}

nlohmann::json storage_json(const std::vector<StorageGroup>& groups) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& g : groups) {
    a.push_back(
        {{"kind", g.kind}, {"format", g.format}, {"count", g.count}, {"parameters", g.parameters}, {"bytes", g.bytes}});
  }
  return a;
}

// The `gguf image` line's end: where loads get the image from.
std::string gguf_image_where(const CheckpointSummary& s) {
  switch (s.gguf_image) {
    case GgufImageSource::CacheHit:
    case GgufImageSource::CacheWritten: return "cached at " + s.gguf_image_file;
    case GgufImageSource::Memory: return "converted into memory by each load";
    case GgufImageSource::Described:
      return "not converted here: loads convert the file into it (cached for files from 64 MiB, docs/gguf.md §4)";
    case GgufImageSource::None: break;
  }
  return "";
}

std::string per_token_text(const CheckpointSummary& s) {
  std::string o = fmt::format("per token     {} of weights streamed ({} bytes)",
                              format_bytes(s.decode_bytes_per_token()), s.decode_bytes_per_token());
  if (s.decode_bytes_per_token() != s.bytes_per_token) {
    o += fmt::format(" in fast precision ({} kernels), {} ({} bytes) in exact precision", s.fast_kernels,
                     format_bytes(s.bytes_per_token), s.bytes_per_token);
  }
  return o + "\n";
}

nlohmann::json rope_json(const RopeParams& r) {
  return {{"rope_type", r.type},
          {"rope_theta", r.theta},
          {"partial_rotary_factor", r.partial_rotary_factor},
          {"factor", r.factor}};
}

}  // namespace

uint64_t CheckpointSummary::kv_bytes_at(int64_t context) const {
  if (context <= 0) return 0;
  const auto ctx = static_cast<uint64_t>(context);
  const uint64_t sliding_positions = std::min<uint64_t>(ctx, static_cast<uint64_t>(std::max(sliding_window, 0)));
  return kv_bytes_per_token_full * ctx + kv_bytes_per_token_sliding * sliding_positions;
}

DrafterSummary summarize_drafter(const DrafterCheckpoint& ck, const TargetConfig* target) {
  const DrafterConfig& c = ck.config;
  DrafterSummary d;
  d.dir = ck.dir;
  d.model_type = c.model_type;
  d.backbone_hidden_size = c.backbone_hidden_size;
  d.hidden_size = c.text.hidden_size;
  d.num_layers = c.text.num_hidden_layers;
  d.num_heads = c.text.num_attention_heads;
  d.head_dim = c.text.head_dim;
  d.global_head_dim = c.text.global_head_dim;
  d.intermediate_size = c.text.intermediate_size;
  d.vocab_size = c.text.vocab_size;
  d.centroid_head = ck.centroid_head;
  d.num_centroids = c.num_centroids;
  d.centroid_top_k = c.centroid_intermediate_top_k;
  const StorageTally tally = tally_storage(ck.store, c.quantization, "model.");
  d.storage = tally.groups;
  d.parameters = tally.parameters;
  d.tensor_bytes = tally.tensor_bytes;
  d.bytes_on_disk = bytes_on_disk(ck.dir, ck.gguf_image, ck.store);

  uint64_t n = ck.pre_projection.nbytes() + ck.post_projection.nbytes() + vbytes(ck.final_norm);
  for (const DrafterLayerModules& L : ck.layers) {
    n += L.q_proj.nbytes() + L.o_proj.nbytes() + L.gate_proj.nbytes() + L.up_proj.nbytes() + L.down_proj.nbytes();
    for (const TensorView* v : {L.q_norm, L.input_layernorm, L.post_attention_layernorm, L.pre_feedforward_layernorm,
                                L.post_feedforward_layernorm, L.layer_scalar}) {
      n += vbytes(v);
    }
  }
  const ModuleRef& head = ck.lm_head ? *ck.lm_head : ck.embed_tokens;
  if (ck.centroid_head && ck.centroids && c.num_centroids > 0) {
    const uint64_t per_cluster = static_cast<uint64_t>(d.vocab_size / c.num_centroids);
    n += ck.centroids->nbytes() + static_cast<uint64_t>(c.centroid_intermediate_top_k) * per_cluster * row_bytes(head);
  } else {
    n += head.nbytes();
  }
  d.bytes_per_step = n;
  if (target) d.compat_problems = check_drafter_compat(*target, c);
  return d;
}

CheckpointSummary summarize_checkpoint(const TargetCheckpoint& ck, const DrafterCheckpoint* drafter) {
  const TargetConfig& c = ck.config;
  const TextConfig& t = c.text;
  CheckpointSummary s;
  s.dir = ck.dir;
  s.model_type = c.model_type;
  s.text_model_type = t.model_type;
  s.architectures = c.architectures;
  s.prefix = ck.prefix;
  s.per_layer_inputs = t.hidden_size_per_layer_input > 0;
  s.kv_sharing = t.num_kv_shared_layers > 0;
  s.k_eq_v = t.attention_k_eq_v;
  s.moe = t.enable_moe_block;
  s.hidden_size = t.hidden_size;
  s.num_layers = t.num_hidden_layers;
  s.vocab_size = t.vocab_size;
  s.sliding_window = t.sliding_window;
  s.per_layer_input_width = t.hidden_size_per_layer_input;
  if (s.moe) {
    s.num_experts = t.num_experts;
    s.top_k_experts = t.top_k_experts;
    s.moe_intermediate_size = t.moe_intermediate_size;
  }
  s.first_shared_layer = c.first_shared_layer;
  s.last_sliding_donor = c.last_sliding_donor;
  s.last_full_donor = c.last_full_donor;

  for (LayerType type : {LayerType::Sliding, LayerType::Full}) {
    LayerTypeSummary ls;
    ls.type = type;
    std::set<int64_t> widths;
    for (const LayerGeometry& g : c.layers) {
      if (g.type != type) continue;
      if (ls.count == 0) {
        ls.num_heads = t.num_attention_heads;
        ls.num_kv_heads = g.num_kv_heads;
        ls.head_dim = g.head_dim;
        ls.k_eq_v = g.k_eq_v;
        ls.rope = g.rope;
      }
      ++ls.count;
      if (g.kv_donor) ++ls.donors;
      widths.insert(g.mlp_width);
      const uint64_t per_token =
          2ull * static_cast<uint64_t>(g.num_kv_heads) * static_cast<uint64_t>(g.head_dim) * 4ull;
      if (g.kv_donor) (type == LayerType::Full ? s.kv_bytes_per_token_full : s.kv_bytes_per_token_sliding) += per_token;
    }
    ls.mlp_widths.assign(widths.begin(), widths.end());
    if (ls.count > 0) s.layer_types.push_back(ls);
  }
  for (const LayerGeometry& g : c.layers) s.kv_source.push_back(g.kv_source);
  s.kv_bytes_sliding_total = s.kv_bytes_per_token_sliding * static_cast<uint64_t>(std::max(t.sliding_window, 0));

  const StorageTally tally = tally_storage(ck.store, c.quantization, ck.prefix);
  s.storage = tally.groups;
  s.parameters = tally.parameters;
  s.tower_parameters = tally.tower_parameters;
  s.text_parameters = tally.parameters - tally.tower_parameters;
  s.towers = tally.towers;
  s.tower_bytes = tally.tower_bytes;
  s.tensor_bytes = tally.tensor_bytes;
  s.bytes_on_disk = bytes_on_disk(ck.dir, ck.gguf_image, ck.store);
  s.gguf_image = ck.gguf_image;
  if (ck.gguf_image != GgufImageSource::None) {
    s.gguf_image_bytes = ck.store.total_bytes();
    if ((ck.gguf_image == GgufImageSource::CacheHit || ck.gguf_image == GgufImageSource::CacheWritten) &&
        ck.embed_tokens.weight != nullptr && ck.embed_tokens.weight->file != nullptr)
      s.gguf_image_file = *ck.embed_tokens.weight->file;
  }
  s.bytes_per_token = target_bytes_per_token(ck);
  if (drafter) s.drafter = summarize_drafter(*drafter, &c);
  return s;
}

std::string format_summary(const CheckpointSummary& s) {
  std::string o;
  o += fmt::format("checkpoint    {}\n", s.dir);
  o += fmt::format("architecture  {} ({}; text {}), tensor prefix '{}'\n", s.model_type,
                   s.architectures.empty() ? std::string("-") : fmt::format("{}", fmt::join(s.architectures, ", ")),
                   s.text_model_type, s.prefix);
  o += fmt::format(
      "variant       per-layer inputs: {}, KV sharing: {}, k_eq_v: {}, MoE: {}\n",
      s.per_layer_inputs ? fmt::format("yes (width {})", s.per_layer_input_width) : "no",
      s.kv_sharing ? fmt::format("yes ({} layers)", s.num_layers - s.first_shared_layer) : "no",
      s.k_eq_v ? "yes" : "no",
      s.moe ? fmt::format("yes ({} experts, top {}, width {})", s.num_experts, s.top_k_experts, s.moe_intermediate_size)
            : "no");
  o += fmt::format("geometry      hidden {}, {} layers, vocab {}, sliding window {}\n", s.hidden_size, s.num_layers,
                   s.vocab_size, s.sliding_window);
  o += fmt::format("  {:<8} {:>6} {:>6} {:>6} {:>8} {:>8} {:>6}  {:<12} {}\n", "type", "layers", "donors", "heads",
                   "kv_heads", "head_dim", "k_eq_v", "mlp", "rope");
  for (const auto& l : s.layer_types) {
    std::vector<std::string> w;
    for (auto x : l.mlp_widths) w.push_back(std::to_string(x));
    o += fmt::format("  {:<8} {:>6} {:>6} {:>6} {:>8} {:>8} {:>6}  {:<12} {}\n",
                     l.type == LayerType::Sliding ? "sliding" : "full", l.count, l.donors, l.num_heads, l.num_kv_heads,
                     l.head_dim, l.k_eq_v ? "yes" : "no", fmt::format("{}", fmt::join(w, "/")), rope_text(l.rope));
  }
  o += fmt::format("KV donors     last sliding {}, last full {}", s.last_sliding_donor, s.last_full_donor);
  if (s.kv_sharing) {
    std::map<int, std::vector<int>> readers;
    for (int i = s.first_shared_layer; i < static_cast<int>(s.kv_source.size()); ++i)
      readers[s.kv_source[i]].push_back(i);
    std::vector<std::string> parts;
    for (const auto& [src, layers] : readers) {
      parts.push_back(fmt::format("{} {} {} {}", layers.size() == 1 ? "layer" : "layers", ranges_text(layers),
                                  layers.size() == 1 ? "reads" : "read", src));
    }
    o += fmt::format("; layers from {} share KV: {}", s.first_shared_layer, fmt::join(parts, "; "));
  }
  o += "\n";
  o += s.gguf_image == GgufImageSource::None
           ? "storage\n"
           : "storage       as loaded: the GGUF's tensors converted (docs/gguf.md §4; the file's ggml types below)\n";
  storage_table(o, s.storage);
  if (s.towers.empty()) {
    o += fmt::format("parameters    {} ({})\n", count_text(s.parameters), s.parameters);
  } else {
    o += fmt::format("parameters    {} ({}): text {} ({}), towers {} ({})\n", count_text(s.parameters), s.parameters,
                     count_text(s.text_parameters), s.text_parameters, count_text(s.tower_parameters),
                     s.tower_parameters);
    o += fmt::format("towers        {} in {} tensors, never read by text generation\n", format_bytes(s.tower_bytes),
                     tower_tensor_count(s.towers));
    storage_table(o, s.towers);
  }
  if (s.gguf_image == GgufImageSource::None) {
    o += fmt::format("size          {} on disk ({} bytes; tensors {} bytes)\n", format_bytes(s.bytes_on_disk),
                     s.bytes_on_disk, s.tensor_bytes);
  } else {
    o += fmt::format("size          {} on disk ({} bytes, the .gguf file)\n", format_bytes(s.bytes_on_disk),
                     s.bytes_on_disk);
    o += fmt::format("gguf image    {} as converted for loading ({} bytes; tensors {} bytes), {}\n",
                     format_bytes(s.gguf_image_bytes), s.gguf_image_bytes, s.tensor_bytes, gguf_image_where(s));
  }
  o += per_token_text(s);
  o += fmt::format(
      "KV cache f32  {} per token (full layers) + {} per token up to {} positions (sliding layers, "
      "fixed {} once full)\n",
      format_bytes(s.kv_bytes_per_token_full), format_bytes(s.kv_bytes_per_token_sliding), s.sliding_window,
      format_bytes(s.kv_bytes_sliding_total));
  // --kv-type bf16 stores half the bytes of every row; q8 17/64 of them (1 + 2/32 bytes an element).
  o += fmt::format("KV cache bf16 {} per token (full layers) + {} per token up to {} positions (sliding layers)\n",
                   format_bytes(s.kv_bytes_per_token_full / 2), format_bytes(s.kv_bytes_per_token_sliding / 2),
                   s.sliding_window);
  o += fmt::format("KV cache q8   {} per token (full layers) + {} per token up to {} positions (sliding layers)\n",
                   format_bytes(s.kv_bytes_per_token_full * 17 / 64),
                   format_bytes(s.kv_bytes_per_token_sliding * 17 / 64), s.sliding_window);
  if (s.drafter) {
    const DrafterSummary& d = *s.drafter;
    o += fmt::format("drafter       {} ({})\n", d.dir, d.model_type);
    o += fmt::format("  trunk       hidden {} (backbone {}), {} layers, {} heads, head dim {}/{}, mlp {}\n",
                     d.hidden_size, d.backbone_hidden_size, d.num_layers, d.num_heads, d.head_dim, d.global_head_dim,
                     d.intermediate_size);
    o += d.centroid_head
             ? fmt::format("  head        centroid-masked ({} centroids, top {}, {} tokens per cluster)\n",
                           d.num_centroids, d.centroid_top_k, d.num_centroids > 0 ? d.vocab_size / d.num_centroids : 0)
             : fmt::format("  head        dense tied ({} x {})\n", d.vocab_size, d.hidden_size);
    storage_table(o, d.storage);
    o += fmt::format("  parameters  {} ({}), {} on disk, {} per draft step\n", count_text(d.parameters), d.parameters,
                     format_bytes(d.bytes_on_disk), format_bytes(d.bytes_per_step));
    if (d.compat_problems.empty()) {
      o += "  compatible  yes\n";
    } else {
      o += "  compatible  NO\n";
      for (const auto& p : d.compat_problems) o += fmt::format("    - {}\n", p);
    }
  }
  return o;
}

nlohmann::json summary_json(const CheckpointSummary& s) {
  nlohmann::json types = nlohmann::json::array();
  for (const auto& l : s.layer_types) {
    types.push_back({{"type", layer_type_name(l.type)},
                     {"layers", l.count},
                     {"donors", l.donors},
                     {"num_heads", l.num_heads},
                     {"num_kv_heads", l.num_kv_heads},
                     {"head_dim", l.head_dim},
                     {"k_eq_v", l.k_eq_v},
                     {"mlp_widths", l.mlp_widths},
                     {"rope", rope_json(l.rope)}});
  }
  nlohmann::json j = {
      {"dir", s.dir},
      {"model_type", s.model_type},
      {"text_model_type", s.text_model_type},
      {"architectures", s.architectures},
      {"prefix", s.prefix},
      {"variant",
       {{"per_layer_inputs", s.per_layer_inputs}, {"kv_sharing", s.kv_sharing}, {"k_eq_v", s.k_eq_v}, {"moe", s.moe}}},
      {"hidden_size", s.hidden_size},
      {"num_layers", s.num_layers},
      {"vocab_size", s.vocab_size},
      {"sliding_window", s.sliding_window},
      {"per_layer_input_width", s.per_layer_input_width},
      {"moe",
       {{"num_experts", s.num_experts},
        {"top_k_experts", s.top_k_experts},
        {"moe_intermediate_size", s.moe_intermediate_size}}},
      {"layer_types", types},
      {"first_shared_layer", s.first_shared_layer},
      {"last_sliding_donor", s.last_sliding_donor},
      {"last_full_donor", s.last_full_donor},
      {"kv_source", s.kv_source},
      {"storage", storage_json(s.storage)},
      {"parameters", s.parameters},
      {"text_parameters", s.text_parameters},
      {"tower_parameters", s.tower_parameters},
      {"towers", storage_json(s.towers)},
      {"tower_bytes", s.tower_bytes},
      {"tensor_bytes", s.tensor_bytes},
      {"bytes_on_disk", s.bytes_on_disk},
      {"gguf_image", s.gguf_image == GgufImageSource::None
                         ? nlohmann::json(nullptr)
                         : nlohmann::json{{"bytes", s.gguf_image_bytes},
                                          {"cached", !s.gguf_image_file.empty()},
                                          {"file", s.gguf_image_file.empty() ? nlohmann::json(nullptr)
                                                                             : nlohmann::json(s.gguf_image_file)}}},
      {"bytes_per_token", s.decode_bytes_per_token()},
      {"bytes_per_token_exact", s.bytes_per_token},
      {"fast_kernels", s.fast_bytes_per_token > 0 ? nlohmann::json(s.fast_kernels) : nlohmann::json(nullptr)},
      {"kv_cache_f32",
       {{"bytes_per_token_full", s.kv_bytes_per_token_full},
        {"bytes_per_token_sliding", s.kv_bytes_per_token_sliding},
        {"sliding_total_bytes", s.kv_bytes_sliding_total}}},
      {"kv_cache_bf16",
       {{"bytes_per_token_full", s.kv_bytes_per_token_full / 2},
        {"bytes_per_token_sliding", s.kv_bytes_per_token_sliding / 2},
        {"sliding_total_bytes", s.kv_bytes_sliding_total / 2}}},
      {"kv_cache_q8",
       {{"bytes_per_token_full", s.kv_bytes_per_token_full * 17 / 64},
        {"bytes_per_token_sliding", s.kv_bytes_per_token_sliding * 17 / 64},
        {"sliding_total_bytes", s.kv_bytes_sliding_total * 17 / 64}}},
  };
  if (s.drafter) {
    const DrafterSummary& d = *s.drafter;
    j["drafter"] = {{"dir", d.dir},
                    {"model_type", d.model_type},
                    {"backbone_hidden_size", d.backbone_hidden_size},
                    {"hidden_size", d.hidden_size},
                    {"num_layers", d.num_layers},
                    {"num_heads", d.num_heads},
                    {"head_dim", d.head_dim},
                    {"global_head_dim", d.global_head_dim},
                    {"intermediate_size", d.intermediate_size},
                    {"vocab_size", d.vocab_size},
                    {"head", d.centroid_head ? "centroid" : "dense"},
                    {"num_centroids", d.num_centroids},
                    {"centroid_top_k", d.centroid_top_k},
                    {"storage", storage_json(d.storage)},
                    {"parameters", d.parameters},
                    {"tensor_bytes", d.tensor_bytes},
                    {"bytes_on_disk", d.bytes_on_disk},
                    {"bytes_per_step", d.bytes_per_step},
                    {"compatible", d.compat_problems.empty()},
                    {"compat_problems", d.compat_problems}};
  } else {
    j["drafter"] = nullptr;
  }
  return j;
}

}  // namespace specula
