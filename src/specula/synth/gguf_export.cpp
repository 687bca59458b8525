// TargetCheckpoint -> gemma4 GGUF (docs/gguf.md). The metadata is the inverse of
// io/gguf_config.cpp; tensor names come from io/gguf_names.
#include "specula/synth/gguf_export.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include "specula/io/gguf_config.h"
#include "specula/io/gguf_names.h"
#include "specula/kernels/ggml_quants.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/weight_matrix.h"
#include "specula/synth/gguf_quant_mix.h"
#include "specula/synth/gguf_tokenizer_export.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula::synth {

namespace {

// The metadata both architectures share (the keys io/gguf_config.cpp reads), under `arch.`.
struct ModelMetadata {
  std::string arch;  // "gemma4" or "gemma4-assistant"
  const TextConfig* text = nullptr;
  const std::vector<LayerGeometry>* layers = nullptr;
  std::optional<int> bos_token_id, pad_token_id;
  std::vector<int> eos_token_ids;
};

// A drafter's layers own no KV heads (they read the target's caches); the key, which the layout
// requires, then carries its config's count, as llama.cpp's converter writes it.
int32_t config_kv_heads(const TextConfig& t, LayerType type) {
  const int heads =
      type == LayerType::Full && t.num_global_key_value_heads ? *t.num_global_key_value_heads : t.num_key_value_heads;
  return std::max(heads, 1);
}

void add_metadata(GgufWriter& w, const ModelMetadata& m, const std::string& name) {
  const TextConfig& t = *m.text;
  const std::string kArch = m.arch + ".";
  w.set_string("general.architecture", m.arch);
  w.set_string("general.name", name);
  const auto u32 = [&](const char* k, int64_t v) { w.set_u32(kArch + k, static_cast<uint32_t>(v)); };
  u32("block_count", t.num_hidden_layers);
  u32("context_length", t.max_position_embeddings);
  u32("embedding_length", t.hidden_size);
  std::vector<int32_t> ff, kv;
  std::vector<bool> sliding;
  for (const LayerGeometry& g : *m.layers) {
    ff.push_back(static_cast<int32_t>(g.mlp_width));
    kv.push_back(g.num_kv_heads > 0 ? g.num_kv_heads : config_kv_heads(t, g.type));
    sliding.push_back(g.type == LayerType::Sliding);
  }
  const auto all_same = [](const std::vector<int32_t>& v) {
    return std::all_of(v.begin(), v.end(), [&](int32_t x) { return x == v[0]; });
  };
  if (all_same(ff))
    u32("feed_forward_length", ff[0]);
  else
    w.set_array<int32_t>(kArch + "feed_forward_length", ff);
  u32("attention.head_count", t.num_attention_heads);
  if (all_same(kv))
    u32("attention.head_count_kv", kv[0]);
  else
    w.set_array<int32_t>(kArch + "attention.head_count_kv", kv);
  const int64_t d_full = t.global_head_dim > 0 ? t.global_head_dim : t.head_dim;
  u32("attention.key_length", d_full);
  u32("attention.value_length", d_full);
  u32("attention.key_length_swa", t.head_dim);
  u32("attention.value_length_swa", t.head_dim);
  u32("attention.sliding_window", t.sliding_window);
  w.set_bool_array(kArch + "attention.sliding_window_pattern", sliding);
  w.set_f32(kArch + "attention.layer_norm_rms_epsilon", static_cast<float>(t.rms_norm_eps));
  u32("attention.shared_kv_layers", t.num_kv_shared_layers);
  w.set_f32(kArch + "rope.freq_base", static_cast<float>(t.rope_full.theta));
  w.set_f32(kArch + "rope.freq_base_swa", static_cast<float>(t.rope_sliding.theta));
  u32("rope.dimension_count", d_full);
  u32("rope.dimension_count_swa", t.head_dim);
  if (t.final_logit_softcapping)
    w.set_f32(kArch + "final_logit_softcapping", static_cast<float>(*t.final_logit_softcapping));
  u32("embedding_length_per_layer_input", t.hidden_size_per_layer_input);
  if (t.enable_moe_block) {
    u32("expert_count", t.num_experts);
    u32("expert_used_count", t.top_k_experts);
    u32("expert_feed_forward_length", t.moe_intermediate_size);
  }
  if (m.bos_token_id) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*m.bos_token_id));
  if (m.pad_token_id) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*m.pad_token_id));
  if (!m.eos_token_ids.empty()) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(m.eos_token_ids[0]));
  if (m.eos_token_ids.size() > 1) w.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(m.eos_token_ids[1]));
}

// The RoPE forms GGUF can carry: default sliding layers; default or proportional full layers
// (the latter as the rope_freqs tensor).
void add_rope_freqs(GgufWriter& w, const TextConfig& t, const std::string& source) {
  const RopeParams& s = t.rope_sliding;
  if (s.type != "default")
    fail("{}: sliding_attention RoPE type \"{}\" has no GGUF form (only default)", source, s.type);
  const RopeParams& f = t.rope_full;
  if (f.type == "default") return;
  if (f.type != "proportional")
    fail("{}: full_attention RoPE type \"{}\" has no GGUF form (default or proportional)", source, f.type);
  const int64_t d = t.global_head_dim > 0 ? t.global_head_dim : t.head_dim;
  const auto rotated = static_cast<int64_t>(f.partial_rotary_factor * static_cast<double>(d) / 2.0);
  std::vector<float> v = proportional_rope_freqs(d / 2, rotated, static_cast<float>(f.factor));
  std::vector<std::byte> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  w.add_tensor("rope_freqs.weight", GgmlType::F32, {d / 2}, std::move(bytes));
}

// The safetensors name under `model.` (what io/gguf_names maps), or "" for tensors outside it.
std::string canonical_name(const std::string& name, const std::string& prefix) {
  if (name.starts_with(prefix)) return "model." + name.substr(prefix.size());
  for (const char* head : {"lm_head", "language_model.lm_head", "model.lm_head"})
    if (name == std::string(head) + ".weight") return "lm_head.weight";
  return "";
}

// One tensor to write: its rows as f32 (row r of `rows`, `cols` values), and for MLX 4-bit
// modules the matrices themselves (for the exact Q4_1 form).
struct Source {
  std::vector<int64_t> shape;  // logical
  int64_t rows = 1, cols = 1;
  std::vector<WeightMatrix> matrices;  // one per expert (or one); empty for vectors
  const TensorView* vector = nullptr;
  int64_t rows_per_matrix = 1;

  void row(int64_t r, float* out) const {
    if (vector) {
      const auto n = static_cast<size_t>(cols);
      for (size_t j = 0; j < n; ++j) {
        switch (vector->dtype) {
          case DType::F32: std::memcpy(&out[j], vector->data + 4 * j, 4); break;
          case DType::BF16: {
            uint16_t h;
            std::memcpy(&h, vector->data + 2 * j, 2);
            out[j] = bf16_to_f32(h);
            break;
          }
          case DType::F16: {
            uint16_t h;
            std::memcpy(&h, vector->data + 2 * j, 2);
            out[j] = f16_to_f32(h);
            break;
          }
          default: fail("tensor {} is {}, not a float vector", vector->name, dtype_name(vector->dtype));
        }
      }
      return;
    }
    dequantize_row(matrices[static_cast<size_t>(r / rows_per_matrix)], r % rows_per_matrix, out);
  }
};

Source source_of(const TensorStore& store, const QuantizationConfig& quantization, const std::string& name) {
  const TensorView* t = store.find(name);
  Source s;
  if (t->shape.size() <= 1) {
    s.vector = t;
    s.shape = t->shape.empty() ? std::vector<int64_t>{1} : t->shape;
    s.cols = s.shape[0];
    return s;
  }
  ModuleRef m;
  m.path = name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
  m.weight = t;
  m.scales = store.find(m.path + ".scales");
  m.biases = store.find(m.path + ".biases");
  m.shape = t->shape;
  if (m.scales) {
    m.quantized = true;
    m.quant = quantization.spec_for(m.path);
    m.shape.back() = t->shape.back() * 32 / m.quant.bits;
  }
  s.shape = m.shape;
  s.cols = m.shape.back();
  s.rows_per_matrix = m.shape[m.shape.size() - 2];
  if (m.shape.size() == 3) {
    for (int64_t e = 0; e < m.shape[0]; ++e) s.matrices.push_back(weight_matrix(m, e));
  } else {
    s.matrices.push_back(weight_matrix(m));
  }
  s.rows = s.rows_per_matrix * static_cast<int64_t>(s.matrices.size());
  return s;
}

float scale_value(const WeightMatrix& w, const void* base, int64_t i) {
  uint16_t h;
  switch (w.scale_dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, static_cast<const std::byte*>(base) + 4 * i, 4);
      return f;
    }
    case DType::BF16: std::memcpy(&h, static_cast<const std::byte*>(base) + 2 * i, 2); return bf16_to_f32(h);
    default: std::memcpy(&h, static_cast<const std::byte*>(base) + 2 * i, 2); return f16_to_f32(h);
  }
}

bool exact_f16(float x) { return f16_to_f32(f32_to_f16(x)) == x; }

// Whether every matrix is MLX 4-bit with group 32/64 and scales/biases exact in f16.
bool q4_1_exact(const Source& s) {
  if (s.matrices.empty()) return false;
  for (const WeightMatrix& w : s.matrices) {
    if (w.format != WeightFormat::Affine || w.bits != 4 || (w.group_size != 32 && w.group_size != 64)) return false;
    const int64_t n = w.rows * w.groups_per_row();
    for (int64_t i = 0; i < n; ++i)
      if (!exact_f16(scale_value(w, w.scales, i)) || !exact_f16(scale_value(w, w.biases, i))) return false;
  }
  return true;
}

// Row r as Q4_1 blocks holding the module's own codes, scales and biases.
void q4_1_row(const Source& s, int64_t r, std::byte* out) {
  const WeightMatrix& w = s.matrices[static_cast<size_t>(r / s.rows_per_matrix)];
  const int64_t row = r % s.rows_per_matrix;
  const auto* words = static_cast<const uint32_t*>(w.data) + row * (w.cols / 8);
  for (int64_t b = 0; b < w.cols / 32; ++b) {
    BlockQ4_1 q{};
    const int64_t g = row * w.groups_per_row() + b * 32 / w.group_size;
    q.d = f32_to_f16(scale_value(w, w.scales, g));
    q.m = f32_to_f16(scale_value(w, w.biases, g));
    for (int j = 0; j < 16; ++j) {
      const uint32_t lo = unpack_code(words, 4, b * 32 + j), hi = unpack_code(words, 4, b * 32 + j + 16);
      q.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    std::memcpy(out + b * sizeof(BlockQ4_1), &q, sizeof(BlockQ4_1));
  }
}

struct MatrixTypeName {
  GgufMatrixType type;
  GgmlType ggml;
  const char* name;
};

constexpr MatrixTypeName kMatrixTypes[] = {
    {GgufMatrixType::F32, GgmlType::F32, "f32"},        {GgufMatrixType::BF16, GgmlType::BF16, "bf16"},
    {GgufMatrixType::Q8_0, GgmlType::Q8_0, "q8_0"},     {GgufMatrixType::Q4_0, GgmlType::Q4_0, "q4_0"},
    {GgufMatrixType::Q4_1, GgmlType::Q4_1, "q4_1"},     {GgufMatrixType::Q5_0, GgmlType::Q5_0, "q5_0"},
    {GgufMatrixType::Q5_1, GgmlType::Q5_1, "q5_1"},     {GgufMatrixType::Q4_K, GgmlType::Q4_K, "q4_k"},
    {GgufMatrixType::Q5_K, GgmlType::Q5_K, "q5_k"},     {GgufMatrixType::Q6_K, GgmlType::Q6_K, "q6_k"},
    {GgufMatrixType::Q4_K_M, GgmlType::Q4_K, "q4_k_m"}, {GgufMatrixType::Q5_K_M, GgmlType::Q5_K, "q5_k_m"},
};

GgmlType matrix_type(GgufMatrixType t) {
  for (const MatrixTypeName& m : kMatrixTypes)
    if (m.type == t) return m.ggml;
  return GgmlType::F32;
}

// `copy_affine`: write the MLX 4-bit module's own codes, scales and biases as Q4_1 blocks.
void add_tensor(GgufWriter& w, const std::string& gguf_name, std::shared_ptr<const Source> s, GgmlType type,
                bool copy_affine) {
  std::vector<int64_t> dims(s->shape.rbegin(), s->shape.rend());
  const bool exact_4bit = copy_affine;
  w.add_tensor(gguf_name, type, dims, [s, type, exact_4bit](int64_t b, int64_t e, std::span<std::byte> out) {
    const size_t row_bytes = out.size() / static_cast<size_t>(e - b);
    std::vector<float> row(static_cast<size_t>(s->cols));
    for (int64_t r = b; r < e; ++r) {
      std::byte* dst = out.data() + static_cast<size_t>(r - b) * row_bytes;
      if (exact_4bit) {
        q4_1_row(*s, r, dst);
        continue;
      }
      s->row(r, row.data());
      quantize_row_ggml(type, row.data(), dst, s->cols);
    }
  });
}

}  // namespace

GgufMatrixType parse_gguf_matrix_type(const std::string& name) {
  std::string known;
  for (const MatrixTypeName& m : kMatrixTypes) {
    if (name == m.name) return m.type;
    known += (known.empty() ? "" : ", ") + std::string(m.name);
  }
  fail("GGUF matrix type \"{}\" is not one of {}", name, known);
}

const char* gguf_matrix_type_name(GgufMatrixType t) {
  for (const MatrixTypeName& m : kMatrixTypes)
    if (m.type == t) return m.name;
  return "?";
}

namespace {

// The checkpoint's tensors under their GGUF names, matrices in the chosen type. `canonical` gives
// a stored name's safetensors name under `model.` (or "" to leave the tensor out).
void add_tensors(GgufWriter& w, const TensorStore& store, const QuantizationConfig& quantization, bool moe,
                 const GgufExportOptions& options, const std::function<std::string(const std::string&)>& canonical) {
  struct Entry {
    std::string gguf;
    std::shared_ptr<const Source> source;
  };
  std::vector<Entry> entries;
  std::vector<std::string> matrix_names;
  for (const std::string& st_name : store.names()) {
    if (st_name.ends_with(".scales") || st_name.ends_with(".biases")) continue;
    const std::string name = canonical(st_name);
    if (name.empty()) continue;
    std::optional<std::string> gguf = hf_to_gguf_name(name);
    if (!gguf) continue;  // not a Gemma 4 text tensor (e.g. rotary buffers)
    if (!gguf->ends_with(".weight") && !gguf->ends_with(".scale")) *gguf += ".weight";
    entries.push_back({*gguf, std::make_shared<const Source>(source_of(store, quantization, st_name))});
    if (entries.back().source->vector == nullptr) matrix_names.push_back(*gguf);
  }
  const bool mixture = options.matrices == GgufMatrixType::Q4_K_M || options.matrices == GgufMatrixType::Q5_K_M;
  const KQuantMix mix(matrix_names, moe, matrix_type(options.matrices));
  for (const Entry& e : entries) {
    const Source& s = *e.source;
    GgmlType type = GgmlType::F32;
    bool copy_affine = false;
    if (s.vector == nullptr && mixture) {
      type = mix.type_of(e.gguf, s.cols);
    } else if (s.vector == nullptr) {
      type = matrix_type(options.matrices);
      copy_affine = options.affine4_as_q4_1 && q4_1_exact(s);
      if (copy_affine) type = GgmlType::Q4_1;
      if (s.cols % ggml_block_size(type) != 0) type = GgmlType::F32;  // rows shorter than a block
    }
    add_tensor(w, e.gguf, e.source, type, copy_affine && type == GgmlType::Q4_1);
  }
}

std::string file_name(const std::string& dir, const GgufExportOptions& options) {
  return options.name.empty() ? std::filesystem::path(dir).lexically_normal().filename().string() : options.name;
}

}  // namespace

GgufWriter target_gguf_writer(const TargetCheckpoint& ck, const GgufExportOptions& options) {
  GgufWriter w;
  const TargetConfig& cfg = ck.config;
  add_metadata(w, {"gemma4", &cfg.text, &cfg.layers, cfg.bos_token_id, cfg.pad_token_id, cfg.eos_token_ids},
               file_name(ck.dir, options));
  if (!options.tokenizer_dir.empty()) add_gguf_tokenizer(w, options.tokenizer_dir);
  add_rope_freqs(w, cfg.text, cfg.source);
  add_tensors(w, ck.store, cfg.quantization, cfg.text.enable_moe_block, options,
              [&](const std::string& n) { return canonical_name(n, ck.prefix); });
  return w;
}

GgufWriter drafter_gguf_writer(const DrafterCheckpoint& ck, const GgufExportOptions& options) {
  GgufWriter w;
  const DrafterConfig& cfg = ck.config;
  add_metadata(w, {"gemma4-assistant", &cfg.text, &cfg.layers, std::nullopt, std::nullopt, cfg.eos_token_ids},
               file_name(ck.dir, options));
  w.set_u32("gemma4-assistant.embedding_length_out", static_cast<uint32_t>(cfg.backbone_hidden_size));
  w.set_u32("gemma4-assistant.nextn_predict_layers", static_cast<uint32_t>(cfg.text.num_hidden_layers));
  if (!options.tokenizer_dir.empty()) add_gguf_tokenizer(w, options.tokenizer_dir);
  add_rope_freqs(w, cfg.text, cfg.source);
  // As llama.cpp's converter: the centroid head (masked_embedding.*) is left out, so the file
  // runs the dense tied head. Drafter tensors are stored under `model.` or at the top level.
  add_tensors(w, ck.store, cfg.quantization, false, options, [](const std::string& n) -> std::string {
    if (n.starts_with("masked_embedding.")) return "";
    if (n == "pre_projection.weight" || n == "post_projection.weight" || n.starts_with("model.")) return n;
    return canonical_name(n, "model.");
  });
  return w;
}

void write_target_gguf(const TargetCheckpoint& ck, const std::string& path, const GgufExportOptions& options) {
  target_gguf_writer(ck, options).write(path);
}

void write_drafter_gguf(const DrafterCheckpoint& ck, const std::string& path, const GgufExportOptions& options) {
  drafter_gguf_writer(ck, options).write(path);
}

}  // namespace specula::synth
