#include "specula/synth/plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "specula/kernels/quant.h"
#include "specula/synth/rng.h"
#include "specula/synth/towers.h"
#include "specula/util/error.h"
#include "specula/util/half.h"
#include "specula/util/thread_pool.h"

namespace specula::synth {

namespace {

constexpr int kBos = 2;
constexpr int kPad = 0;
const std::vector<int> kTargetEos = {1, 106};
const std::vector<int> kGenerationEos = {1, 106, 50};
const std::vector<int> kSuppressTokens = {258883, 258882};  // <audio|>, <image|>, as in Gemma 4 IT
constexpr int64_t kMinVocab = 256;                          // keeps bos 2, eos 1/106/50 inside the vocabulary
constexpr int64_t kMaxVocab = 1ll << 22;                    // 16x the real vocabulary
constexpr const char* kTransformersVersion = "5.5.0";

// ---- value generation ---------------------------------------------------------------------

// How a tensor's values are distributed.
struct Dist {
  enum Kind { Normal, Uniform } kind = Normal;
  float a = 0.0f;  // Normal: mean; Uniform: low
  float b = 1.0f;  // Normal: std;  Uniform: high
};

Dist linear_dist(int64_t in) { return {Dist::Normal, 0.0f, 1.0f / std::sqrt(static_cast<float>(in))}; }
// Embedding tables feed a tied head: std 2/sqrt(width) gives logits of std ~2 on unit-RMS hiddens,
// and embedding * sqrt(width) (the Gemma input scale) of RMS ~2.
Dist embedding_dist(int64_t width) { return {Dist::Normal, 0.0f, 2.0f / std::sqrt(static_cast<float>(width))}; }
Dist norm_dist() { return {Dist::Uniform, 0.9f, 1.1f}; }
Dist layer_scalar_dist() { return {Dist::Uniform, 0.5f, 1.0f}; }

inline float draw(const Dist& d, uint64_t bits) {
  if (d.kind == Dist::Uniform) return d.a + (d.b - d.a) * unit_uniform(bits);
  return d.a + d.b * approx_normal(bits);
}

// The logical (unquantized) values of a tensor: shape [..., cols], viewed as flat rows of `cols`.
// Rows come from value streams named without the checkpoint prefix, so both namings (and the
// quantized and bf16 variants of one seed) hold the same underlying weights. A tensor can be the
// concatenation of several streams along dim -2 (HF's fused experts.gate_up_proj = [gate; up]).
struct Logical {
  struct Part {
    uint64_t key;
    int64_t rows;  // rows this stream contributes per leading index
  };
  std::vector<int64_t> shape;
  Dist dist;
  std::vector<Part> parts;

  int64_t cols() const { return shape.back(); }
  int64_t flat_rows() const {
    int64_t n = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
    return n;
  }
  // Flat rows per index of dim 0 (the writer's row unit); 1-D tensors are handled by the caller.
  int64_t rows_per_dim0() const { return shape.size() <= 1 ? 1 : flat_rows() / shape[0]; }

  void row(int64_t flat_row, float* out) const {
    int64_t block_rows = 0;
    for (const auto& p : parts) block_rows += p.rows;
    const int64_t block = flat_row / block_rows;
    int64_t r = flat_row % block_rows;
    size_t pi = 0;
    while (r >= parts[pi].rows) r -= parts[pi++].rows;
    const uint64_t base = static_cast<uint64_t>(block * parts[pi].rows + r) * static_cast<uint64_t>(cols());
    const int64_t n = cols();
    for (int64_t c = 0; c < n; ++c) out[c] = draw(dist, stream_bits(parts[pi].key, base + c));
  }
};

void store_value(float v, DType dtype, std::byte* dst) {
  if (dtype == DType::BF16) {
    const uint16_t h = f32_to_bf16(v);
    std::memcpy(dst, &h, 2);
  } else {
    std::memcpy(dst, &v, 4);
  }
}

// Runs fn(begin, end) over flat rows, in parallel when the work is large enough to pay for it.
// Each row's bytes depend only on its index, so the split cannot change the output.
void for_rows(int64_t n, int64_t cols, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 1 || n * cols < (1 << 16)) {
    fn(0, n);
    return;
  }
  ThreadPool::global().parallel_for(n, 1, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

TensorSpec dense_spec(std::string name, DType dtype, std::shared_ptr<const Logical> src) {
  TensorSpec spec;
  spec.name = std::move(name);
  spec.dtype = dtype;
  spec.shape = src->shape;
  const size_t esize = dtype_size(dtype);
  if (src->shape.size() == 1) {
    // A vector: dim-0 "rows" are single elements of the one logical row.
    spec.fill = [src, dtype, esize](int64_t b, int64_t e, std::span<std::byte> out) {
      std::vector<float> row(static_cast<size_t>(src->cols()));
      src->row(0, row.data());
      for (int64_t i = b; i < e; ++i) store_value(row[i], dtype, out.data() + (i - b) * esize);
    };
    return spec;
  }
  spec.fill = [src, dtype, esize](int64_t b, int64_t e, std::span<std::byte> out) {
    const int64_t rpd = src->rows_per_dim0();
    const int64_t cols = src->cols();
    const int64_t first = b * rpd;
    for_rows((e - b) * rpd, cols, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        src->row(first + r, row.data());
        std::byte* dst = out.data() + static_cast<size_t>(r * cols) * esize;
        for (int64_t c = 0; c < cols; ++c) store_value(row[c], dtype, dst + c * esize);
      }
    });
  };
  return spec;
}

// One quantized module: the packed codes and the per-group scales/biases all come from quantizing
// the same logical rows. The plan lists a module's tensors as weight, scales, biases, so the
// weight's fills (which quantize every row anyway) keep the whole module's scales and biases, and
// the two later tensors are copied from there: one quantization pass per module. Fills in any
// other order (or after the copy is released) recompute, so the bytes never depend on the order.
struct QuantSource {
  std::shared_ptr<const Logical> src;
  int bits = 4;
  int group_size = 64;
  DType scale_dtype = DType::BF16;

  static constexpr uint64_t kMaxKeptBytes = 1ull << 30;  // beyond this, recompute instead
  std::mutex mutex;
  int64_t kept_rows = 0;  // flat rows [0, kept_rows) are in `kept_*`
  bool scales_served = false, biases_served = false;
  std::vector<std::byte> kept_scales, kept_biases;

  int64_t words_per_row() const { return src->cols() * bits / 32; }
  int64_t groups_per_row() const { return src->cols() / group_size; }
  size_t param_row_bytes() const { return static_cast<size_t>(groups_per_row()) * dtype_size(scale_dtype); }

  // Quantizes flat rows [first, first+n): words (may be null) and scale/bias bytes.
  void quantize(int64_t first, int64_t n, uint32_t* words, std::byte* scales, std::byte* biases) const {
    const int64_t cols = src->cols(), wpr = words_per_row(), gpr = groups_per_row();
    const size_t ssize = dtype_size(scale_dtype);
    for_rows(n, cols, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(cols)), s(static_cast<size_t>(gpr)), z(static_cast<size_t>(gpr));
      std::vector<uint32_t> scratch(words ? 0 : static_cast<size_t>(wpr));
      for (int64_t r = r0; r < r1; ++r) {
        src->row(first + r, row.data());
        uint32_t* w = words ? words + r * wpr : scratch.data();
        quantize_row_affine(row, bits, group_size, std::span<uint32_t>(w, static_cast<size_t>(wpr)), s, z);
        for (int64_t g = 0; g < gpr; ++g) {
          store_value(s[g], scale_dtype, scales + static_cast<size_t>(r * gpr + g) * ssize);
          store_value(z[g], scale_dtype, biases + static_cast<size_t>(r * gpr + g) * ssize);
        }
      }
    });
  }

  void fill_words(int64_t b, int64_t e, std::span<std::byte> out) {
    const int64_t rpd = src->rows_per_dim0();
    const int64_t first = b * rpd, n = (e - b) * rpd;
    const size_t prb = param_row_bytes();
    // The output span is only byte-aligned in general; quantize into an aligned buffer.
    std::vector<uint32_t> words(static_cast<size_t>(n * words_per_row()));
    std::lock_guard<std::mutex> lock(mutex);
    const int64_t total = src->flat_rows();
    const bool keep = first == kept_rows && !scales_served && !biases_served &&
                      2 * static_cast<uint64_t>(total) * prb <= kMaxKeptBytes;
    if (keep) {
      kept_scales.resize(static_cast<size_t>(total) * prb);
      kept_biases.resize(static_cast<size_t>(total) * prb);
      quantize(first, n, words.data(), kept_scales.data() + first * prb, kept_biases.data() + first * prb);
      kept_rows = first + n;
    } else {
      std::vector<std::byte> s(static_cast<size_t>(n) * prb), z(static_cast<size_t>(n) * prb);
      quantize(first, n, words.data(), s.data(), z.data());
    }
    std::memcpy(out.data(), words.data(), words.size() * 4);
  }

  void fill_params(bool want_scales, int64_t b, int64_t e, std::span<std::byte> out) {
    const int64_t rpd = src->rows_per_dim0();
    const int64_t first = b * rpd, n = (e - b) * rpd;
    const size_t prb = param_row_bytes();
    std::lock_guard<std::mutex> lock(mutex);
    if (first + n <= kept_rows && !(want_scales ? scales_served : biases_served)) {
      const auto& kept = want_scales ? kept_scales : kept_biases;
      std::memcpy(out.data(), kept.data() + static_cast<size_t>(first) * prb, static_cast<size_t>(n) * prb);
      // Release the copy once both tensors have been served through their last row.
      if (first + n == src->flat_rows()) {
        (want_scales ? scales_served : biases_served) = true;
        if (scales_served && biases_served) {
          std::vector<std::byte>().swap(kept_scales);
          std::vector<std::byte>().swap(kept_biases);
          kept_rows = 0;
        }
      }
      return;
    }
    std::vector<std::byte> s(static_cast<size_t>(n) * prb), z(static_cast<size_t>(n) * prb);
    quantize(first, n, nullptr, s.data(), z.data());
    std::memcpy(out.data(), (want_scales ? s : z).data(), static_cast<size_t>(n) * prb);
  }
};

std::vector<int64_t> with_last(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

// ---- inventory builder ----------------------------------------------------------------------

class Builder {
 public:
  Builder(uint64_t seed, std::string stream_namespace, DType dtype)
      : seed_(seed), ns_(std::move(stream_namespace)), dtype_(dtype) {}

  // Value stream of a prefix-free key.
  uint64_t key(const std::string& k) const { return stream_key(seed_, ns_ + k); }

  std::shared_ptr<Logical> logical(const std::string& k, std::vector<int64_t> shape, Dist dist) const {
    auto l = std::make_shared<Logical>();
    const int64_t rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
    l->shape = std::move(shape);
    l->dist = dist;
    l->parts = {{key(k), rows}};
    return l;
  }

  void vector(const std::string& name, const std::string& k, int64_t n, Dist dist) {
    tensors_.push_back(dense_spec(name, dtype_, logical(k, {n}, dist)));
  }

  // A linear / embedding / expert stack: dense `<name><suffix>` or the quantized triple.
  // Returns whether it was quantized.
  bool module(const std::string& name, std::shared_ptr<const Logical> src, const std::optional<QuantSpec>& quant,
              const std::string& dense_suffix = ".weight") {
    const int64_t cols = src->cols();
    const bool quantizable = quant && cols % quant->group_size == 0 && (cols * quant->bits) % 32 == 0;
    if (!quantizable) {
      tensors_.push_back(dense_spec(name + dense_suffix, dtype_, std::move(src)));
      return false;
    }
    auto q = std::make_shared<QuantSource>();
    q->src = src;
    q->bits = quant->bits;
    q->group_size = quant->group_size;
    q->scale_dtype = dtype_;
    TensorSpec w{name + ".weight", DType::U32, with_last(src->shape, cols * quant->bits / 32), {}};
    w.fill = [q](int64_t b, int64_t e, std::span<std::byte> out) { q->fill_words(b, e, out); };
    TensorSpec s{name + ".scales", dtype_, with_last(src->shape, cols / quant->group_size), {}};
    s.fill = [q](int64_t b, int64_t e, std::span<std::byte> out) { q->fill_params(true, b, e, out); };
    TensorSpec z{name + ".biases", dtype_, s.shape, {}};
    z.fill = [q](int64_t b, int64_t e, std::span<std::byte> out) { q->fill_params(false, b, e, out); };
    tensors_.push_back(std::move(w));
    tensors_.push_back(std::move(s));
    tensors_.push_back(std::move(z));
    return true;
  }

  void add(TensorSpec spec) { tensors_.push_back(std::move(spec)); }
  DType dtype() const { return dtype_; }

  // A 0-d tensor (one value).
  void scalar(const std::string& name, const std::string& k, Dist dist) {
    TensorSpec spec = dense_spec(name, dtype_, logical(k, {1}, dist));
    spec.shape = {};
    tensors_.push_back(std::move(spec));
  }

  // Sorted by module path, a quantized module's tensors as weight, scales, biases (the order
  // QuantSource computes in one pass).
  std::vector<TensorSpec> take() {
    const auto key = [](const std::string& name) {
      for (const auto& [suffix, rank] :
           {std::pair{".weight", '0'}, std::pair{".scales", '1'}, std::pair{".biases", '2'}}) {
        const std::string sfx(suffix);
        if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
          return name.substr(0, name.size() - sfx.size()) + '\x01' + rank;
        }
      }
      return name + '\x01' + '0';
    };
    std::sort(tensors_.begin(), tensors_.end(),
              [&](const TensorSpec& a, const TensorSpec& b) { return key(a.name) < key(b.name); });
    for (size_t i = 1; i < tensors_.size(); ++i) {
      if (tensors_[i].name == tensors_[i - 1].name) fail("synth: duplicate tensor '{}'", tensors_[i].name);
    }
    return std::move(tensors_);
  }

 private:
  uint64_t seed_;
  std::string ns_;
  DType dtype_;
  std::vector<TensorSpec> tensors_;
};

// ---- geometry (docs/gemma4.md §2.4), computed here independently of the loader ---------------

struct Layer {
  bool sliding = true;
  int head_dim = 0;
  int kv_heads = 0;
  bool k_eq_v = false;
  bool donor = true;
  int64_t mlp_width = 0;
};

std::vector<Layer> layers_of(const TextConfig& t) {
  const int first_shared = t.num_hidden_layers - t.num_kv_shared_layers;
  std::vector<Layer> out;
  for (int i = 0; i < t.num_hidden_layers; ++i) {
    Layer l;
    l.sliding = t.layer_types[i] == LayerType::Sliding;
    l.head_dim = l.sliding ? t.head_dim : t.global_head_dim;
    l.k_eq_v = t.attention_k_eq_v && !l.sliding;
    l.kv_heads = (l.k_eq_v && t.num_global_key_value_heads) ? *t.num_global_key_value_heads : t.num_key_value_heads;
    l.donor = i < first_shared;
    l.mlp_width = t.intermediate_size * ((t.use_double_wide_mlp && first_shared > 0 && i >= first_shared) ? 2 : 1);
    out.push_back(l);
  }
  return out;
}

// ---- config JSON ----------------------------------------------------------------------------

const char* dtype_json_name(DType d) { return d == DType::F32 ? "float32" : "bfloat16"; }

nlohmann::json rope_json(const TextConfig& t) {
  auto one = [](const RopeParams& r) {
    nlohmann::json j = {{"rope_type", r.type}, {"rope_theta", r.theta}};
    if (r.type == "proportional") j["partial_rotary_factor"] = r.partial_rotary_factor;
    return j;
  };
  return {{"sliding_attention", one(t.rope_sliding)}, {"full_attention", one(t.rope_full)}};
}

nlohmann::json layer_types_json(const std::vector<LayerType>& types) {
  nlohmann::json j = nlohmann::json::array();
  for (auto t : types) j.push_back(layer_type_name(t));
  return j;
}

template <typename T>
nlohmann::json or_null(bool present, T value) {
  return present ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json target_text_json(const TextConfig& t, DType dtype) {
  nlohmann::json j;
  j["model_type"] = t.model_type;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["attention_k_eq_v"] = t.attention_k_eq_v;
  j["bos_token_id"] = kBos;
  j["dtype"] = dtype_json_name(dtype);
  j["enable_moe_block"] = t.enable_moe_block;
  j["eos_token_id"] = kTargetEos.front();
  j["final_logit_softcapping"] =
      or_null(t.final_logit_softcapping.has_value(), t.final_logit_softcapping.value_or(0.0));
  j["global_head_dim"] = t.global_head_dim;
  j["head_dim"] = t.head_dim;
  j["hidden_activation"] = t.hidden_activation;
  j["hidden_size"] = t.hidden_size;
  j["hidden_size_per_layer_input"] = t.hidden_size_per_layer_input;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = t.intermediate_size;
  j["layer_types"] = layer_types_json(t.layer_types);
  j["max_position_embeddings"] = t.max_position_embeddings;
  j["moe_intermediate_size"] = or_null(t.enable_moe_block, t.moe_intermediate_size);
  j["num_attention_heads"] = t.num_attention_heads;
  j["num_experts"] = or_null(t.enable_moe_block, t.num_experts);
  j["num_global_key_value_heads"] =
      or_null(t.num_global_key_value_heads.has_value(), t.num_global_key_value_heads.value_or(0));
  j["num_hidden_layers"] = t.num_hidden_layers;
  j["num_key_value_heads"] = t.num_key_value_heads;
  j["num_kv_shared_layers"] = t.num_kv_shared_layers;
  j["pad_token_id"] = kPad;
  j["rms_norm_eps"] = t.rms_norm_eps;
  j["rope_parameters"] = rope_json(t);
  j["sliding_window"] = t.sliding_window;
  j["tie_word_embeddings"] = t.tie_word_embeddings;
  j["top_k_experts"] = or_null(t.enable_moe_block, t.top_k_experts);
  j["use_bidirectional_attention"] = "vision";
  j["use_cache"] = true;
  j["use_double_wide_mlp"] = t.use_double_wide_mlp;
  j["vocab_size"] = t.vocab_size;
  j["vocab_size_per_layer_input"] = t.vocab_size_per_layer_input;
  return j;
}

// The preset's text config with the options applied.
TextConfig effective_text(const Preset& p, const SynthOptions& o) {
  TextConfig t = p.text;
  if (o.vocab) {
    t.vocab_size = *o.vocab;
    t.vocab_size_per_layer_input = *o.vocab;
  } else if (t.vocab_size_per_layer_input == 0) {
    t.vocab_size_per_layer_input = t.vocab_size;
  }
  return t;
}

// The tower tensors (synth/towers.h), always dense: their value streams are named without the
// `model.` root, so both namings hold the same values.
void add_towers(Builder& b, const Preset& p, int64_t text_hidden, Naming naming) {
  const std::string root = naming == Naming::Hf ? "model." : "";
  for (const TowerTensor& t : tower_tensors(p, text_hidden, naming == Naming::Hf)) {
    const std::string k = t.name.substr(root.size());
    switch (t.kind) {
      case TowerTensor::Kind::Linear: {
        int64_t in = 1;  // a conv kernel's fan-in is everything but its output channels
        for (size_t i = 1; i < t.shape.size(); ++i) in *= t.shape[i];
        auto src = b.logical(k, t.shape, linear_dist(in));
        b.add(dense_spec(t.name, b.dtype(), std::move(src)));
        break;
      }
      case TowerTensor::Kind::Table:
        b.add(dense_spec(t.name, b.dtype(), b.logical(k, t.shape, embedding_dist(t.shape.back()))));
        break;
      case TowerTensor::Kind::Norm: b.vector(t.name, k, t.shape[0], norm_dist()); break;
      case TowerTensor::Kind::Bias: b.vector(t.name, k, t.shape[0], Dist{Dist::Uniform, -0.1f, 0.1f}); break;
      case TowerTensor::Kind::ClipBound:
        b.scalar(t.name, k, t.lower_bound ? Dist{Dist::Uniform, -12.0f, -8.0f} : Dist{Dist::Uniform, 8.0f, 12.0f});
        break;
    }
  }
}

std::string bits_list() { return "2, 3, 4, 5, 6, 8"; }
// The group sizes MLX checkpoints use (the loader also takes 16, which only GGUF Q6_K produces).
bool is_mlx_group_size(int g) { return g == 32 || g == 64 || g == 128; }
std::string group_list() { return "32, 64, 128"; }

}  // namespace

const char* naming_name(Naming n) { return n == Naming::Hf ? "hf" : "mlx"; }

uint64_t tensor_bytes(DType dtype, const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (auto d : shape) n *= static_cast<uint64_t>(d);
  return n * dtype_size(dtype);
}

uint64_t CheckpointPlan::data_bytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors) total += tensor_bytes(t.dtype, t.shape);
  return total;
}

void validate_options(const SynthOptions& o) {
  find_preset(o.preset);  // throws listing the valid names
  if (o.dtype != DType::BF16 && o.dtype != DType::F32) {
    fail("synth: unsupported dtype {} (allowed: bf16, f32)", dtype_name(o.dtype));
  }
  if (o.quant) {
    if (!is_supported_bits(o.quant->bits)) {
      fail("synth: unsupported bits {} (allowed: {})", o.quant->bits, bits_list());
    }
    if (!is_mlx_group_size(o.quant->group_size)) {
      fail("synth: unsupported group size {} (allowed: {})", o.quant->group_size, group_list());
    }
    if (o.quant->mode != "affine") fail("synth: unsupported quantization mode '{}' (allowed: affine)", o.quant->mode);
  }
  if (o.with_towers) {
    const Preset& p = find_preset(o.preset);
    if (!p.vision && !p.audio) fail("synth: preset '{}' has no vision or audio towers (--with-towers)", o.preset);
  }
  if (o.vocab && (*o.vocab < kMinVocab || *o.vocab > kMaxVocab)) {
    fail("synth: vocab {} out of range (allowed: {} to {})", *o.vocab, kMinVocab, kMaxVocab);
  }
}

CheckpointPlan plan_target(const SynthOptions& o) {
  validate_options(o);
  const Preset& p = find_preset(o.preset);
  const TextConfig t = effective_text(p, o);
  const Naming naming = o.resolved_naming();
  const std::string P = naming == Naming::Hf ? "model.language_model." : "language_model.model.";
  const auto layers = layers_of(t);
  const int64_t H = t.hidden_size;
  const int64_t V = t.vocab_size;
  const std::optional<QuantSpec>& q = o.quant;
  // mlx-lm's Gemma 4 quant_predicate keeps the router at 8 bits, group 64.
  const std::optional<QuantSpec> router_q = q ? std::optional<QuantSpec>(QuantSpec{8, 64, "affine"}) : std::nullopt;

  Builder b(o.seed, "target/", o.dtype);
  nlohmann::json overrides = nlohmann::json::object();
  auto linear = [&](const std::string& k, std::vector<int64_t> shape) {
    const int64_t in = shape.back();
    return b.logical(k, std::move(shape), linear_dist(in));
  };

  b.module(P + "embed_tokens", b.logical("embed_tokens", {V, H}, embedding_dist(H)), q);
  b.vector(P + "norm.weight", "norm", H, norm_dist());
  const int64_t W = t.hidden_size_per_layer_input;
  if (W > 0) {
    const int64_t NL = t.num_hidden_layers;
    b.module(P + "embed_tokens_per_layer",
             b.logical("embed_tokens_per_layer", {t.vocab_size_per_layer_input, NL * W},
                       // per-layer embeddings are scaled by sqrt(W) in the forward: unit RMS after.
                       Dist{Dist::Normal, 0.0f, 1.0f / std::sqrt(static_cast<float>(W))}),
             q);
    b.module(P + "per_layer_model_projection", linear("per_layer_model_projection", {NL * W, H}), q);
    b.vector(P + "per_layer_projection_norm.weight", "per_layer_projection_norm", W, norm_dist());
  }

  for (int i = 0; i < t.num_hidden_layers; ++i) {
    const Layer& L = layers[i];
    const std::string k = fmt::format("layers.{}.", i);
    const std::string n = P + k;
    for (const char* norm :
         {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"}) {
      b.vector(n + norm + ".weight", k + norm, H, norm_dist());
    }
    b.vector(n + "layer_scalar", k + "layer_scalar", 1, layer_scalar_dist());

    const int64_t D = L.head_dim;
    b.module(n + "self_attn.q_proj", linear(k + "self_attn.q_proj", {t.num_attention_heads * D, H}), q);
    b.vector(n + "self_attn.q_norm.weight", k + "self_attn.q_norm", D, norm_dist());
    b.module(n + "self_attn.o_proj", linear(k + "self_attn.o_proj", {H, t.num_attention_heads * D}), q);
    // HF originals also ship (unused) K/V projections on KV-shared layers; mlx-lm drops them.
    if (L.donor || naming == Naming::Hf) {
      b.module(n + "self_attn.k_proj", linear(k + "self_attn.k_proj", {L.kv_heads * D, H}), q);
      b.vector(n + "self_attn.k_norm.weight", k + "self_attn.k_norm", D, norm_dist());
      if (!L.k_eq_v) b.module(n + "self_attn.v_proj", linear(k + "self_attn.v_proj", {L.kv_heads * D, H}), q);
    }

    b.module(n + "mlp.gate_proj", linear(k + "mlp.gate_proj", {L.mlp_width, H}), q);
    b.module(n + "mlp.up_proj", linear(k + "mlp.up_proj", {L.mlp_width, H}), q);
    b.module(n + "mlp.down_proj", linear(k + "mlp.down_proj", {H, L.mlp_width}), q);

    if (W > 0) {
      b.module(n + "per_layer_input_gate", linear(k + "per_layer_input_gate", {W, H}), q);
      b.module(n + "per_layer_projection", linear(k + "per_layer_projection", {H, W}), q);
      b.vector(n + "post_per_layer_input_norm.weight", k + "post_per_layer_input_norm", H, norm_dist());
    }

    if (t.enable_moe_block) {
      const int64_t E = t.num_experts, I = t.moe_intermediate_size;
      if (b.module(n + "router.proj", linear(k + "router.proj", {E, H}), router_q)) {
        overrides[n + "router.proj"] = {{"group_size", router_q->group_size}, {"bits", router_q->bits}};
      }
      b.vector(n + "router.scale", k + "router.scale", H, norm_dist());
      b.vector(n + "router.per_expert_scale", k + "router.per_expert_scale", E, norm_dist());
      const std::string gate = k + "experts.gate_proj", up = k + "experts.up_proj";
      if (naming == Naming::Hf) {
        // One [E, 2I, H] parameter: rows [0, I) of each expert are gate, [I, 2I) up.
        auto fused = std::make_shared<Logical>();
        fused->shape = {E, 2 * I, H};
        fused->dist = linear_dist(H);
        fused->parts = {{b.key(gate), I}, {b.key(up), I}};
        b.module(n + "experts.gate_up_proj", fused, q, "");
        b.module(n + "experts.down_proj", linear(k + "experts.down_proj", {E, H, I}), q, "");
      } else {
        b.module(n + "experts.switch_glu.gate_proj", linear(gate, {E, I, H}), q);
        b.module(n + "experts.switch_glu.up_proj", linear(up, {E, I, H}), q);
        b.module(n + "experts.switch_glu.down_proj", linear(k + "experts.down_proj", {E, H, I}), q);
      }
      for (const char* norm :
           {"pre_feedforward_layernorm_2", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"}) {
        b.vector(n + norm + ".weight", k + norm, H, norm_dist());
      }
    }
  }

  if (o.with_towers) add_towers(b, p, H, naming);

  CheckpointPlan plan;
  plan.tensors = b.take();

  nlohmann::json c;
  c["architectures"] = {p.architecture};
  c["model_type"] = p.model_type;
  c["text_config"] = target_text_json(t, o.dtype);
  c["vision_config"] = o.with_towers && p.vision ? vision_config_json(*p.vision) : nlohmann::json(nullptr);
  c["audio_config"] = o.with_towers && p.audio ? audio_config_json(*p.audio) : nlohmann::json(nullptr);
  c["boi_token_id"] = 255999;
  c["eoi_token_id"] = 258882;
  c["image_token_id"] = 258880;
  c["bos_token_id"] = kBos;
  c["eos_token_id"] = kTargetEos;
  c["pad_token_id"] = kPad;
  c["initializer_range"] = 0.02;
  c["tie_word_embeddings"] = true;
  c["vocab_size"] = V;  // mlx-lm's wrapper copies this into text_config (docs/gemma4.md §2.1)
  c["dtype"] = dtype_json_name(o.dtype);
  c["transformers_version"] = kTransformersVersion;
  if (q) {
    nlohmann::json qj = {{"group_size", q->group_size}, {"bits", q->bits}, {"mode", q->mode}};
    for (auto& [path, spec] : overrides.items()) qj[path] = spec;
    c["quantization"] = qj;
    c["quantization_config"] = qj;
  }
  plan.config = std::move(c);
  if (o.with_towers) plan.processor_config = processor_config_json(p);

  std::vector<int> suppress;
  for (int id : kSuppressTokens) {
    if (id < V) suppress.push_back(id);
  }
  plan.generation_config = {{"bos_token_id", kBos},
                            {"do_sample", true},
                            {"eos_token_id", kGenerationEos},
                            {"pad_token_id", kPad},
                            {"suppress_tokens", suppress},
                            {"temperature", 1.0},
                            {"top_k", 64},
                            {"top_p", 0.95},
                            {"transformers_version", kTransformersVersion}};
  return plan;
}

CheckpointPlan plan_drafter(const SynthOptions& o) {
  validate_options(o);
  const Preset& p = find_preset(o.preset);
  const TextConfig target = effective_text(p, o);
  const DrafterPreset& d = p.drafter;
  const int64_t V = target.vocab_size;
  const int64_t h = d.hidden_size;
  const int64_t Hb = target.hidden_size;
  if (d.centroid_head && V % d.num_centroids != 0) {
    fail(
        "synth: vocab {} must be a multiple of the drafter's num_centroids {} (preset '{}' has a "
        "centroid-head drafter)",
        V, d.num_centroids, o.preset);
  }
  const std::vector<LayerType> types = {LayerType::Sliding, LayerType::Sliding, LayerType::Sliding, LayerType::Full};

  Builder b(o.seed, "drafter/", DType::BF16);
  auto linear = [&](const std::string& k, std::vector<int64_t> shape) {
    const int64_t in = shape.back();
    return b.logical(k, std::move(shape), linear_dist(in));
  };
  const std::optional<QuantSpec> none;
  b.module("pre_projection", linear("pre_projection", {h, 2 * Hb}), none);
  b.module("post_projection", linear("post_projection", {Hb, h}), none);
  b.module("model.embed_tokens", b.logical("model.embed_tokens", {V, h}, embedding_dist(h)), none);
  b.vector("model.norm.weight", "model.norm", h, norm_dist());
  for (int i = 0; i < 4; ++i) {
    const std::string n = fmt::format("model.layers.{}.", i);
    const int64_t D = types[i] == LayerType::Sliding ? target.head_dim : target.global_head_dim;
    for (const char* norm :
         {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"}) {
      b.vector(n + norm + ".weight", n + norm, h, norm_dist());
    }
    b.vector(n + "layer_scalar", n + "layer_scalar", 1, layer_scalar_dist());
    b.module(n + "self_attn.q_proj", linear(n + "self_attn.q_proj", {d.num_attention_heads * D, h}), none);
    b.vector(n + "self_attn.q_norm.weight", n + "self_attn.q_norm", D, norm_dist());
    b.module(n + "self_attn.o_proj", linear(n + "self_attn.o_proj", {h, d.num_attention_heads * D}), none);
    b.module(n + "mlp.gate_proj", linear(n + "mlp.gate_proj", {d.intermediate_size, h}), none);
    b.module(n + "mlp.up_proj", linear(n + "mlp.up_proj", {d.intermediate_size, h}), none);
    b.module(n + "mlp.down_proj", linear(n + "mlp.down_proj", {h, d.intermediate_size}), none);
  }
  if (d.centroid_head) {
    b.module("masked_embedding.centroids",
             b.logical("masked_embedding.centroids", {d.num_centroids, h}, embedding_dist(h)), none);
    // A seeded Fisher-Yates permutation of the vocabulary, computed on first use.
    struct Ordering {
      std::once_flag once;
      std::vector<int64_t> ids;
    };
    auto ord = std::make_shared<Ordering>();
    const uint64_t key = b.key("masked_embedding.token_ordering");
    TensorSpec spec{"masked_embedding.token_ordering", DType::I64, {V}, {}};
    spec.fill = [ord, key, V](int64_t begin, int64_t end, std::span<std::byte> out) {
      std::call_once(ord->once, [&] {
        ord->ids.resize(static_cast<size_t>(V));
        std::iota(ord->ids.begin(), ord->ids.end(), int64_t{0});
        for (int64_t i = V - 1; i > 0; --i) {
          const auto j =
              static_cast<int64_t>(stream_bits(key, static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1));
          std::swap(ord->ids[i], ord->ids[j]);
        }
      });
      std::memcpy(out.data(), ord->ids.data() + begin, static_cast<size_t>(end - begin) * 8);
    };
    b.add(std::move(spec));
  }

  CheckpointPlan plan;
  plan.tensors = b.take();

  TextConfig dt = target;
  dt.model_type = "gemma4_text";
  dt.hidden_size = h;
  dt.num_hidden_layers = 4;
  dt.layer_types = types;
  dt.num_attention_heads = d.num_attention_heads;
  dt.intermediate_size = d.intermediate_size;
  dt.num_kv_shared_layers = 4;
  dt.hidden_size_per_layer_input = 0;
  dt.vocab_size_per_layer_input = 0;
  dt.use_double_wide_mlp = false;
  dt.enable_moe_block = false;
  dt.final_logit_softcapping.reset();
  nlohmann::json tj = target_text_json(dt, DType::BF16);
  // Drafter text configs carry no MoE/token-id/cache keys (as the shipped ones).
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "moe_intermediate_size",
                          "num_experts", "top_k_experts", "use_bidirectional_attention", "use_cache"}) {
    tj.erase(key);
  }

  nlohmann::json c;
  c["architectures"] = {"Gemma4AssistantForCausalLM"};
  c["model_type"] = d.model_type;
  c["backbone_hidden_size"] = Hb;
  c["use_ordered_embeddings"] = d.centroid_head;
  c["num_centroids"] = d.num_centroids;
  c["centroid_intermediate_top_k"] = d.centroid_top_k;
  c["tie_word_embeddings"] = true;
  c["bos_token_id"] = kBos;
  c["eos_token_id"] = kTargetEos;
  c["pad_token_id"] = kPad;
  c["dtype"] = "bfloat16";
  c["text_config"] = std::move(tj);
  c["transformers_version"] = kTransformersVersion;
  plan.config = std::move(c);
  plan.generation_config = {{"bos_token_id", kBos},
                            {"eos_token_id", kGenerationEos},
                            {"pad_token_id", kPad},
                            {"num_assistant_tokens", 6},
                            {"transformers_version", kTransformersVersion}};
  return plan;
}

std::vector<TensorView> plan_views(const CheckpointPlan& plan) {
  std::vector<TensorView> views;
  views.reserve(plan.tensors.size());
  for (const auto& t : plan.tensors) {
    TensorView v;
    v.name = t.name;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.data = nullptr;
    v.nbytes = static_cast<size_t>(tensor_bytes(t.dtype, t.shape));
    views.push_back(std::move(v));
  }
  return views;
}

}  // namespace specula::synth
