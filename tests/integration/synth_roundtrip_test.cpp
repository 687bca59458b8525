// Synthetic checkpoints end to end: every tiny preset in bf16/f32 and several MLX affine bit widths
// and group sizes, in both tensor namings, is written, loaded back by the real loader, summarized,
// and checked against numbers derived independently from the preset geometry (parameter count,
// bytes per token, KV-cache bytes). Also: determinism (bytes depend on the seed only, not on
// chunking), value statistics, quantized vs bf16 values, HF vs MLX naming holding the same
// weights, sharding, full-size inventories validated without writing them, and the `specula`
// binary's synth/inspect commands with their exit codes.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "read_file.h"
#include "specula/io/checkpoint.h"
#include "specula/io/checkpoint_summary.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/weight_matrix.h"
#include "specula/synth/plan.h"
#include "specula/synth/presets.h"
#include "specula/synth/writer.h"
#include "specula/util/error.h"
#include "specula/util/half.h"
#include "specula/util/progress.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using synth::Naming;
using synth::SynthOptions;
using test::expect_error;
using test::read_file;

const std::vector<std::string> kTinyPresets = {"tiny-dense", "tiny-e4b", "tiny-kveq", "tiny-moe"};
const std::vector<std::string> kFullPresets = {"e2b", "e4b", "12b", "26b-a4b", "31b"};

// A scratch directory for the whole test binary run, removed at exit.
class Scratch {
 public:
  Scratch() {
    std::string tmpl = (fs::temp_directory_path() / "specula-synth-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    root_ = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string path(const std::string& name) const { return (root_ / name).string(); }

 private:
  fs::path root_;
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

std::vector<char> tensor_bytes_of(const TensorView& t) {
  return std::vector<char>(reinterpret_cast<const char*>(t.data), reinterpret_cast<const char*>(t.data) + t.nbytes);
}

float value_at(const TensorView& t, int64_t i) {
  if (t.dtype == DType::F32) {
    float f;
    std::memcpy(&f, t.data + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, t.data + i * 2, 2);
  return bf16_to_f32(h);
}

struct CheckpointVariant {
  std::string label;
  DType dtype;
  std::optional<QuantSpec> quant;
  Naming naming;
};

const std::vector<CheckpointVariant>& checkpoint_variants() {
  static const std::vector<CheckpointVariant> v = {
      {"bf16-hf", DType::BF16, std::nullopt, Naming::Hf},
      {"bf16-mlx", DType::BF16, std::nullopt, Naming::Mlx},
      {"f32-hf", DType::F32, std::nullopt, Naming::Hf},
      {"q4g64-mlx", DType::BF16, QuantSpec{4, 64, "affine"}, Naming::Mlx},
      {"q4g64-hf", DType::BF16, QuantSpec{4, 64, "affine"}, Naming::Hf},
      {"q2g32-mlx", DType::BF16, QuantSpec{2, 32, "affine"}, Naming::Mlx},
      {"q3g32-mlx", DType::BF16, QuantSpec{3, 32, "affine"}, Naming::Mlx},
      {"q5g64-hf", DType::BF16, QuantSpec{5, 64, "affine"}, Naming::Hf},
      {"q6g128-mlx", DType::BF16, QuantSpec{6, 128, "affine"}, Naming::Mlx},
      {"q8g128-f32-mlx", DType::F32, QuantSpec{8, 128, "affine"}, Naming::Mlx},
  };
  return v;
}

SynthOptions options_for(const std::string& preset, const CheckpointVariant& v, uint64_t seed = 7) {
  SynthOptions o;
  o.preset = preset;
  o.seed = seed;
  o.dtype = v.dtype;
  o.quant = v.quant;
  o.naming = v.naming;
  return o;
}

// Logical parameter count of a target, from the preset geometry alone (docs/gemma4.md §3.2),
// written independently of the synth inventory builder and of the summary code.
uint64_t expected_target_params(const TextConfig& t, Naming naming) {
  const uint64_t H = t.hidden_size, V = t.vocab_size, nH = t.num_attention_heads;
  const int NL = t.num_hidden_layers;
  const int first_shared = NL - t.num_kv_shared_layers;
  uint64_t n = V * H + H;  // embedding (tied head) + final norm
  const uint64_t W = t.hidden_size_per_layer_input;
  if (W > 0) n += t.vocab_size_per_layer_input * NL * W + NL * W * H + W;
  for (int i = 0; i < NL; ++i) {
    const bool full = t.layer_types[i] == LayerType::Full;
    const uint64_t D = full ? t.global_head_dim : t.head_dim;
    const bool kv_eq = full && t.attention_k_eq_v;
    const uint64_t kv = (kv_eq && t.num_global_key_value_heads) ? *t.num_global_key_value_heads : t.num_key_value_heads;
    const bool has_kv = i < first_shared || naming == Naming::Hf;
    const uint64_t mlp =
        t.intermediate_size * ((t.use_double_wide_mlp && first_shared > 0 && i >= first_shared) ? 2 : 1);
    n += 4 * H + 1;                                     // four norms + layer_scalar
    n += 2 * nH * D * H + D;                            // q_proj, o_proj, q_norm
    if (has_kv) n += kv * D * H * (kv_eq ? 1 : 2) + D;  // k_proj (+ v_proj), k_norm
    n += 3 * mlp * H;
    if (W > 0) n += 2 * W * H + H;
    if (t.enable_moe_block) {
      const uint64_t E = t.num_experts, I = t.moe_intermediate_size;
      n += E * H + H + E + 3 * E * I * H + 3 * H;
    }
  }
  return n;
}

uint64_t expected_drafter_params(const synth::Preset& p, int64_t vocab) {
  const auto& d = p.drafter;
  const uint64_t h = d.hidden_size, Hb = p.text.hidden_size, V = vocab, nH = d.num_attention_heads;
  uint64_t n = 2 * h * Hb + Hb * h + V * h + h;
  for (int k = 0; k < 4; ++k) {
    const uint64_t D = k == 3 ? p.text.global_head_dim : p.text.head_dim;
    n += 4 * h + 1 + 2 * nH * D * h + D + 3 * d.intermediate_size * h;
  }
  if (d.centroid_head) n += d.num_centroids * h;  // token_ordering is an index, not a parameter
  return n;
}

// KV bytes per token (f32 K and V) of the donor layers of one type, from the geometry.
uint64_t expected_kv_per_token(const TextConfig& t, LayerType type) {
  uint64_t n = 0;
  const int first_shared = t.num_hidden_layers - t.num_kv_shared_layers;
  for (int i = 0; i < first_shared; ++i) {
    if (t.layer_types[i] != type) continue;
    const bool full = type == LayerType::Full;
    const uint64_t D = full ? t.global_head_dim : t.head_dim;
    const uint64_t kv = (full && t.attention_k_eq_v && t.num_global_key_value_heads) ? *t.num_global_key_value_heads
                                                                                     : t.num_key_value_heads;
    n += 2 * kv * D * 4;
  }
  return n;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Weight bytes a decode step reads, from the store's tensor names: everything except the unused
// K/V of KV-shared layers, all but one row of the per-layer-input table, and all but top_k of the
// experts.
uint64_t expected_bytes_per_token(const TensorStore& store, const TextConfig& t, const std::string& prefix) {
  const int first_shared = t.num_hidden_layers - t.num_kv_shared_layers;
  uint64_t total = 0, ple = 0, experts = 0;
  for (const auto& name : store.names()) {
    const TensorView& v = store.get(name);
    bool unused = false;
    for (int i = first_shared; i < t.num_hidden_layers; ++i) {
      const std::string L = fmt::format("{}layers.{}.self_attn.", prefix, i);
      unused = unused || name.rfind(L + "k_proj", 0) == 0 || name.rfind(L + "v_proj", 0) == 0 ||
               name.rfind(L + "k_norm", 0) == 0;
    }
    if (unused) continue;
    total += v.nbytes;
    if (contains(name, "embed_tokens_per_layer")) ple += v.nbytes;
    if (contains(name, ".experts.")) experts += v.nbytes;
  }
  if (ple > 0) total -= ple - ple / static_cast<uint64_t>(t.vocab_size_per_layer_input);
  if (experts > 0) total -= experts / t.num_experts * (t.num_experts - t.top_k_experts);
  return total;
}

std::set<std::string> keys_of(const json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

// Keys of every golden config (top level and text_config), target or drafter.
void golden_keys(const char* part, std::set<std::string>& top, std::set<std::string>& text) {
  const fs::path root = fs::path(SPECULA_TEST_DATA) / "goldens";
  for (const auto& c : fs::directory_iterator(root)) {
    const fs::path cfg = c.path() / part / "config.json";
    if (!fs::exists(cfg)) continue;
    const json j = json::parse(read_file(cfg.string()));
    for (const auto& k : keys_of(j)) {
      if (k != "quantization" && k != "quantization_config") top.insert(k);
    }
    for (const auto& k : keys_of(j.at("text_config"))) text.insert(k);
  }
}

// ---- round trips ---------------------------------------------------------------------------

struct Written {
  std::string model, drafter;
};

Written write_pair(const SynthOptions& o, const std::string& name, uint64_t max_shard = 5'000'000'000ull) {
  Written w{scratch().path(name + "/model"), scratch().path(name + "/drafter")};
  synth::WriteCheckpointOptions wo;
  wo.max_shard_bytes = max_shard;
  synth::write_checkpoint(synth::plan_target(o), w.model, wo);
  synth::write_checkpoint(synth::plan_drafter(o), w.drafter, wo);
  return w;
}

void check_roundtrip(const std::string& preset_name, const CheckpointVariant& v) {
  SCOPED_TRACE(preset_name + " " + v.label);
  const synth::Preset& preset = synth::find_preset(preset_name);
  const SynthOptions o = options_for(preset_name, v);
  const Written w = write_pair(o, preset_name + "-" + v.label);
  const TargetCheckpoint t = load_target(w.model);
  const DrafterCheckpoint d = load_drafter(w.drafter);
  const CheckpointSummary s = summarize_checkpoint(t, &d);
  const TextConfig& text = preset.text;

  EXPECT_EQ(t.prefix, v.naming == Naming::Hf ? "model.language_model." : "language_model.model.");
  EXPECT_EQ(t.config.model_type, "gemma4");
  EXPECT_EQ(t.config.eos_token_ids, (std::vector<int>{1, 106}));
  ASSERT_TRUE(t.generation.has_value());
  EXPECT_EQ(t.generation->eos_token_ids, (std::vector<int>{1, 106, 50}));
  EXPECT_EQ(t.config.quantization.present, v.quant.has_value());
  EXPECT_EQ(t.config.text.sliding_window, 16);
  EXPECT_EQ(t.config.text.vocab_size, 512);

  // Parameters and bytes.
  EXPECT_EQ(s.parameters, expected_target_params(text, v.naming));
  uint64_t group_params = 0, group_bytes = 0;
  for (const auto& g : s.storage) {
    group_params += g.parameters;
    group_bytes += g.bytes;
  }
  EXPECT_EQ(group_params, s.parameters);
  EXPECT_EQ(group_bytes, s.tensor_bytes);
  EXPECT_EQ(s.tensor_bytes, synth::plan_target(o).data_bytes());
  EXPECT_EQ(s.bytes_on_disk, fs::file_size(w.model + "/model.safetensors"));
  EXPECT_GT(s.bytes_on_disk, s.tensor_bytes);
  EXPECT_EQ(s.bytes_per_token, expected_bytes_per_token(t.store, text, t.prefix));
  if (text.hidden_size_per_layer_input == 0 && !text.enable_moe_block) {
    EXPECT_EQ(s.bytes_per_token, s.tensor_bytes);  // dense stack: every byte once (tied head counted once)
  } else {
    EXPECT_LT(s.bytes_per_token, s.tensor_bytes);
  }
  EXPECT_EQ(s.kv_bytes_per_token_full, expected_kv_per_token(text, LayerType::Full));
  EXPECT_EQ(s.kv_bytes_per_token_sliding, expected_kv_per_token(text, LayerType::Sliding));
  EXPECT_EQ(s.kv_bytes_sliding_total, s.kv_bytes_per_token_sliding * 16);
  EXPECT_EQ(s.kv_bytes_at(100), s.kv_bytes_per_token_full * 100 + s.kv_bytes_sliding_total);
  const nlohmann::json kv16 = summary_json(s).at("kv_cache_bf16");  // --kv-type bf16: half of every row
  EXPECT_EQ(kv16.at("bytes_per_token_full").get<uint64_t>() * 2, s.kv_bytes_per_token_full);
  EXPECT_EQ(kv16.at("bytes_per_token_sliding").get<uint64_t>() * 2, s.kv_bytes_per_token_sliding);
  EXPECT_NE(format_summary(s).find("KV cache bf16"), std::string::npos);
  // --kv-type q8: 1 + 2/32 bytes an element against 4.
  const nlohmann::json kv8 = summary_json(s).at("kv_cache_q8");
  EXPECT_EQ(kv8.at("bytes_per_token_full").get<uint64_t>() * 64, s.kv_bytes_per_token_full * 17);
  EXPECT_NE(format_summary(s).find("KV cache q8"), std::string::npos);
  EXPECT_EQ(s.per_layer_inputs, text.hidden_size_per_layer_input > 0);
  EXPECT_EQ(s.kv_sharing, text.num_kv_shared_layers > 0);
  EXPECT_EQ(s.k_eq_v, text.attention_k_eq_v);
  EXPECT_EQ(s.moe, text.enable_moe_block);

  // Storage: what is quantized, with which bits (mlx-lm rules: in-dim divisible by the group;
  // the router at 8 bits group 64).
  const auto check_module = [&](const ModuleRef& m, const std::optional<QuantSpec>& want) {
    SCOPED_TRACE(m.path);
    const int64_t in = m.shape.back();
    const bool quantized = want && in % want->group_size == 0;
    EXPECT_EQ(m.quantized, quantized);
    if (quantized) {
      EXPECT_EQ(m.quant.bits, want->bits);
      EXPECT_EQ(m.quant.group_size, want->group_size);
      EXPECT_EQ(m.scales->dtype, v.dtype);
    } else {
      EXPECT_EQ(m.weight->dtype, v.dtype);
    }
  };
  check_module(t.embed_tokens, v.quant);
  for (const auto& L : t.layers) {
    check_module(L.q_proj, v.quant);
    check_module(L.o_proj, v.quant);
    check_module(L.down_proj, v.quant);
    if (L.k_proj) check_module(*L.k_proj, v.quant);
    if (L.per_layer_projection) check_module(*L.per_layer_projection, v.quant);
    if (L.router_proj) {
      check_module(*L.router_proj, v.quant ? std::optional<QuantSpec>(QuantSpec{8, 64, "affine"}) : std::nullopt);
    }
    for (const auto* e : {&L.experts_gate, &L.experts_up, &L.experts_gate_up, &L.experts_down}) {
      if (*e) check_module(**e, v.quant);
    }
    EXPECT_EQ(L.experts_gate_up.has_value(), text.enable_moe_block && v.naming == Naming::Hf);
    EXPECT_EQ(L.experts_gate.has_value(), text.enable_moe_block && v.naming == Naming::Mlx);
  }

  // Drafter.
  EXPECT_TRUE(check_drafter_compat(t.config, d.config).empty());
  ASSERT_TRUE(s.drafter.has_value());
  EXPECT_TRUE(s.drafter->compat_problems.empty());
  EXPECT_EQ(d.centroid_head, preset.drafter.centroid_head);
  EXPECT_EQ(s.drafter->parameters, expected_drafter_params(preset, 512));
  EXPECT_EQ(d.config.backbone_hidden_size, text.hidden_size);
  ASSERT_TRUE(d.generation.has_value());
  EXPECT_EQ(d.generation->num_assistant_tokens, 6);
  EXPECT_EQ(d.generation->eos_token_ids, (std::vector<int>{1, 106, 50}));
  for (const auto& name : d.store.names()) {
    const DType want = name == "masked_embedding.token_ordering" ? DType::I64 : DType::BF16;
    EXPECT_EQ(d.store.get(name).dtype, want) << name;
  }
}

TEST(SynthRoundtrip, EveryTinyPresetAndVariantLoadsAndSummarizes) {
  for (const auto& p : kTinyPresets) {
    for (const auto& v : checkpoint_variants()) check_roundtrip(p, v);
  }
}

TEST(SynthRoundtrip, ConfigsCarryEveryKeyOfTheGoldenConfigs) {
  std::set<std::string> top, text, dtop, dtext;
  golden_keys("model", top, text);
  golden_keys("drafter", dtop, dtext);
  ASSERT_GT(text.size(), 30u);
  for (const auto& p : kTinyPresets) {
    for (const auto& v : {checkpoint_variants()[0], checkpoint_variants()[3]}) {
      const SynthOptions o = options_for(p, v);
      const json c = synth::plan_target(o).config;
      const auto ct = keys_of(c), ctt = keys_of(c.at("text_config"));
      for (const auto& k : top) EXPECT_TRUE(ct.count(k)) << p << " config.json lacks " << k;
      for (const auto& k : text) EXPECT_TRUE(ctt.count(k)) << p << " text_config lacks " << k;
      EXPECT_EQ(c.contains("quantization"), v.quant.has_value());
      EXPECT_EQ(c.contains("quantization_config"), v.quant.has_value());
      const json dc = synth::plan_drafter(o).config;
      for (const auto& k : dtop) EXPECT_TRUE(keys_of(dc).count(k)) << p << " drafter config lacks " << k;
      for (const auto& k : dtext)
        EXPECT_TRUE(keys_of(dc.at("text_config")).count(k)) << p << " drafter text lacks " << k;
    }
  }
  // The MoE router override is written into both quantization blocks (docs/gemma4.md §4).
  const json c = synth::plan_target(options_for("tiny-moe", checkpoint_variants()[3])).config;
  EXPECT_EQ(c["quantization"]["language_model.model.layers.3.router.proj"], json({{"bits", 8}, {"group_size", 64}}));
  EXPECT_EQ(c["quantization"], c["quantization_config"]);
  EXPECT_EQ(synth::plan_target(options_for("12b", checkpoint_variants()[0])).config["model_type"], "gemma4_unified");
  EXPECT_EQ(synth::plan_drafter(options_for("12b", checkpoint_variants()[0])).config["model_type"],
            "gemma4_unified_assistant");
}

// ---- values ----------------------------------------------------------------------------------

struct Stats {
  double mean = 0, std = 0, min = 1e30, max = -1e30;
};

Stats stats_of(const TensorView& t) {
  Stats s;
  const int64_t n = t.numel();
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = value_at(t, i);
    sum += x;
    sq += x * x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean = sum / n;
  s.std = std::sqrt(std::max(0.0, sq / n - s.mean * s.mean));
  return s;
}

TEST(SynthValues, AreScaledForMeaningfulForwardPasses) {
  const Written w = write_pair(options_for("tiny-e4b", checkpoint_variants()[0]), "values");
  const TargetCheckpoint t = load_target(w.model);
  const int64_t H = t.config.text.hidden_size;
  const Stats e = stats_of(*t.embed_tokens.weight);
  EXPECT_NEAR(e.std, 2.0 / std::sqrt(double(H)), 0.1 * 2.0 / std::sqrt(double(H)));
  EXPECT_NEAR(e.mean, 0.0, 0.01);
  for (const auto& L : t.layers) {
    for (const ModuleRef* m : {&L.q_proj, &L.o_proj, &L.gate_proj, &L.down_proj}) {
      const Stats s = stats_of(*m->weight);
      const double want = 1.0 / std::sqrt(double(m->shape.back()));
      EXPECT_NEAR(s.std, want, 0.1 * want) << m->path;
    }
    for (const TensorView* n : {L.input_layernorm, L.post_feedforward_layernorm, L.q_norm}) {
      const Stats s = stats_of(*n);
      EXPECT_GE(s.min, 0.9 - 1e-2) << n->name;
      EXPECT_LE(s.max, 1.1 + 1e-2) << n->name;
    }
    const float scalar = value_at(*L.layer_scalar, 0);
    EXPECT_GE(scalar, 0.5f);
    EXPECT_LE(scalar, 1.0f);
  }
  const Stats ple = stats_of(*t.embed_tokens_per_layer->weight);
  const double want = 1.0 / std::sqrt(double(t.config.text.hidden_size_per_layer_input));
  EXPECT_NEAR(ple.std, want, 0.1 * want);
}

// Max |a - b| over the first rows of two views of the same logical matrix, relative to max |b|.
double relative_row_error(const ModuleRef& a, const ModuleRef& b, int64_t rows) {
  const WeightMatrix wa = weight_matrix(a), wb = weight_matrix(b);
  std::vector<float> ra(static_cast<size_t>(wa.cols)), rb(static_cast<size_t>(wb.cols));
  double err = 0, scale = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(wa, r, ra.data());
    dequantize_row(wb, r, rb.data());
    for (size_t c = 0; c < ra.size(); ++c) {
      err = std::max(err, double(std::fabs(ra[c] - rb[c])));
      scale = std::max(scale, double(std::fabs(rb[c])));
    }
  }
  return err / scale;
}

TEST(SynthValues, QuantizedCheckpointIsTheQuantizedDenseOne) {
  // Same seed: the quantized checkpoint holds the MLX-affine quantization of the dense weights.
  const Written dense = write_pair(options_for("tiny-kveq", {"f32", DType::F32, std::nullopt, Naming::Mlx}), "qv-f32");
  const Written q8 =
      write_pair(options_for("tiny-kveq", {"q8", DType::BF16, QuantSpec{8, 32, "affine"}, Naming::Mlx}), "qv-q8");
  const Written q4 =
      write_pair(options_for("tiny-kveq", {"q4", DType::BF16, QuantSpec{4, 64, "affine"}, Naming::Mlx}), "qv-q4");
  const TargetCheckpoint td = load_target(dense.model), t8 = load_target(q8.model), t4 = load_target(q4.model);
  ASSERT_TRUE(t8.embed_tokens.quantized);
  // MLX's rule pins the larger extreme exactly and may shrink the step to ~(n-0.5)/n of
  // range/(2^b-1), clamping the other extreme by up to one step: error <= ~2/(2^b-1) of the
  // group's max |w|, plus bf16 rounding of scale (x up to 2^b-1 codes) and bias.
  EXPECT_LT(relative_row_error(t8.embed_tokens, td.embed_tokens, 64), 0.015);
  EXPECT_LT(relative_row_error(t8.layers[2].k_proj.value(), td.layers[2].k_proj.value(), 64), 0.015);
  EXPECT_LT(relative_row_error(t4.layers[1].down_proj, td.layers[1].down_proj, 64), 0.15);
  EXPECT_GT(relative_row_error(t4.layers[1].down_proj, td.layers[1].down_proj, 64), 0.005);  // really 4-bit
}

TEST(SynthValues, HfAndMlxNamingHoldTheSameWeights) {
  const Written hf = write_pair(options_for("tiny-moe", checkpoint_variants()[0]), "naming-hf");
  const Written mlx = write_pair(options_for("tiny-moe", checkpoint_variants()[1]), "naming-mlx");
  const TargetCheckpoint a = load_target(hf.model), b = load_target(mlx.model);
  size_t compared = 0;
  for (const auto& name : b.store.names()) {
    const TensorView& tb = b.store.get(name);
    std::string hname = "model.language_model." + name.substr(std::string("language_model.model.").size());
    if (contains(name, "experts.switch_glu.")) continue;  // compared below
    const TensorView* ta = a.store.find(hname);
    ASSERT_NE(ta, nullptr) << hname;
    EXPECT_EQ(tensor_bytes_of(*ta), tensor_bytes_of(tb)) << name;
    ++compared;
  }
  EXPECT_GT(compared, 50u);
  // Fused [E, 2I, H] = per expert [gate rows; up rows].
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const TensorView& fused = *a.layers[i].experts_gate_up->weight;
    const TensorView& gate = *b.layers[i].experts_gate->weight;
    const TensorView& up = *b.layers[i].experts_up->weight;
    const size_t half = gate.nbytes / gate.shape[0];
    for (int64_t e = 0; e < gate.shape[0]; ++e) {
      EXPECT_EQ(std::memcmp(fused.data + 2 * half * e, gate.data + half * e, half), 0);
      EXPECT_EQ(std::memcmp(fused.data + 2 * half * e + half, up.data + half * e, half), 0);
    }
    EXPECT_EQ(tensor_bytes_of(*a.layers[i].experts_down->weight), tensor_bytes_of(*b.layers[i].experts_down->weight));
  }
}

// ---- determinism -----------------------------------------------------------------------------

std::map<std::string, std::string> dir_contents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files[e.path().filename().string()] = read_file(e.path().string());
  return files;
}

TEST(SynthDeterminism, SameSeedSameBytesOtherSeedOtherWeights) {
  for (const auto& [preset, variant] : {std::pair{std::string("tiny-moe"), checkpoint_variants()[6]},
                                        std::pair{std::string("tiny-e4b"), checkpoint_variants()[0]}}) {
    SCOPED_TRACE(preset);
    const Written a = write_pair(options_for(preset, variant, 11), preset + "-det-a");
    const Written b = write_pair(options_for(preset, variant, 11), preset + "-det-b");
    const Written c = write_pair(options_for(preset, variant, 12), preset + "-det-c");
    EXPECT_EQ(dir_contents(a.model), dir_contents(b.model));
    EXPECT_EQ(dir_contents(a.drafter), dir_contents(b.drafter));
    EXPECT_EQ(read_file(a.model + "/config.json"), read_file(c.model + "/config.json"));
    // Another seed changes every tensor that is not constant by construction.
    const TargetCheckpoint ta = load_target(a.model), tc = load_target(c.model);
    size_t differing = 0;
    for (const auto& name : ta.store.names()) {
      const TensorView& x = ta.store.get(name);
      if (x.numel() < 16) continue;
      differing += tensor_bytes_of(x) != tensor_bytes_of(tc.store.get(name));
      EXPECT_NE(tensor_bytes_of(x), tensor_bytes_of(tc.store.get(name))) << name;
    }
    EXPECT_GT(differing, 20u);
    const DrafterCheckpoint da = load_drafter(a.drafter), dc = load_drafter(c.drafter);
    EXPECT_NE(tensor_bytes_of(*da.embed_tokens.weight), tensor_bytes_of(*dc.embed_tokens.weight));
  }
}

// Filling a tensor in one call or in uneven row pieces gives the same bytes.
void expect_chunking_invariant(const synth::CheckpointPlan& plan) {
  for (const auto& spec : plan.tensors) {
    const int64_t rows = spec.shape.empty() ? 1 : spec.shape[0];
    const size_t row_bytes = static_cast<size_t>(synth::tensor_bytes(spec.dtype, spec.shape) / rows);
    std::vector<std::byte> whole(row_bytes * rows), pieces(row_bytes * rows);
    spec.fill(0, rows, whole);
    int64_t r = 0, step = 1;
    while (r < rows) {
      const int64_t e = std::min(rows, r + step);
      spec.fill(r, e, std::span<std::byte>(pieces.data() + r * row_bytes, (e - r) * row_bytes));
      r = e;
      step = step * 3 + 1;
    }
    EXPECT_TRUE(whole == pieces) << spec.name;
  }
}

TEST(SynthDeterminism, BytesDoNotDependOnChunking) {
  const SynthOptions q3 = options_for("tiny-moe", {"q3-hf", DType::BF16, QuantSpec{3, 32, "affine"}, Naming::Hf});
  expect_chunking_invariant(synth::plan_target(q3));
  const SynthOptions e4b = options_for("tiny-e4b", checkpoint_variants()[1]);
  expect_chunking_invariant(synth::plan_target(e4b));
  expect_chunking_invariant(synth::plan_drafter(e4b));
}

// ---- sharding, options -------------------------------------------------------------------------

TEST(SynthWriter, ShardsLikeHuggingFaceAndLoadsTheSameTensors) {
  const SynthOptions o = options_for("tiny-e4b", checkpoint_variants()[1]);
  const std::string dir = scratch().path("sharded");
  synth::WriteCheckpointOptions wo;
  wo.max_shard_bytes = 700'000;
  const auto written = synth::write_checkpoint(synth::plan_target(o), dir, wo);
  ASSERT_GT(written.weight_files.size(), 2u);
  EXPECT_EQ(written.weight_files.front(),
            fmt::format("model-00001-of-{:05d}.safetensors", written.weight_files.size()));
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
  const json index = json::parse(read_file(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), written.tensor_bytes);
  EXPECT_EQ(index["weight_map"].size(), written.tensor_count);
  const TargetCheckpoint sharded = load_target(dir);
  // Each shard stays within the limit unless it holds a single larger tensor.
  std::map<std::string, std::pair<uint64_t, int>> per_file;  // bytes, tensors
  for (const auto& [name, file] : index["weight_map"].items()) {
    per_file[file.get<std::string>()].first += sharded.store.get(name).nbytes;
    per_file[file.get<std::string>()].second += 1;
  }
  ASSERT_EQ(per_file.size(), written.weight_files.size());
  for (const auto& [file, usage] : per_file) {
    EXPECT_TRUE(usage.first <= 700'000 || usage.second == 1) << file << ": " << usage.first << " bytes";
  }
  const Written single = write_pair(o, "unsharded");
  const TargetCheckpoint one = load_target(single.model);
  ASSERT_EQ(sharded.store.names(), one.store.names());
  for (const auto& name : one.store.names()) {
    EXPECT_EQ(tensor_bytes_of(sharded.store.get(name)), tensor_bytes_of(one.store.get(name))) << name;
  }
  // Re-writing unsharded into the same directory removes the stale shards.
  synth::write_checkpoint(synth::plan_target(o), dir);
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir + "/" + written.weight_files.front()));
  EXPECT_NO_THROW(load_target(dir));
}

TEST(SynthWriter, ShardAssignmentRespectsTheLimit) {
  const auto plan = synth::plan_target(options_for("tiny-dense", checkpoint_variants()[0]));
  const auto shards = synth::shard_tensors(plan.tensors, 50'000);
  size_t count = 0;
  for (const auto& s : shards) {
    uint64_t bytes = 0;
    for (size_t i : s) bytes += synth::tensor_bytes(plan.tensors[i].dtype, plan.tensors[i].shape);
    EXPECT_TRUE(bytes <= 50'000 || s.size() == 1);
    count += s.size();
  }
  EXPECT_EQ(count, plan.tensors.size());
  EXPECT_EQ(synth::shard_tensors(plan.tensors, 5'000'000'000ull).size(), 1u);
}

TEST(SynthOptions, BadOptionsNameTheAllowedValues) {
  SynthOptions o;
  o.preset = "tiny-nope";
  expect_error([&] { synth::validate_options(o); }, {"tiny-nope", "tiny-dense", "tiny-e4b", "26b-a4b", "31b"});
  o.preset = "tiny-dense";
  o.quant = QuantSpec{7, 64, "affine"};
  expect_error([&] { synth::plan_target(o); }, {"bits 7", "2, 3, 4, 5, 6, 8"});
  o.quant = QuantSpec{4, 48, "affine"};
  expect_error([&] { synth::plan_target(o); }, {"group size 48", "32, 64, 128"});
  o.quant.reset();
  o.dtype = DType::F16;
  expect_error([&] { synth::plan_target(o); }, {"F16", "bf16, f32"});
  o.dtype = DType::BF16;
  o.vocab = 100;
  expect_error([&] { synth::plan_target(o); }, {"vocab 100", "256"});
  o.vocab = 1000;  // fine for the target, not for a 32-centroid drafter
  EXPECT_NO_THROW(synth::plan_target(o));
  expect_error([&] { synth::plan_drafter(o); }, {"vocab 1000", "num_centroids 32"});
}

TEST(SynthOptions, VocabOverrideResizesEveryVocabTable) {
  SynthOptions o = options_for("tiny-e4b", checkpoint_variants()[3]);
  o.vocab = 1024;
  const Written w = write_pair(o, "vocab1024");
  const TargetCheckpoint t = load_target(w.model);
  const DrafterCheckpoint d = load_drafter(w.drafter);
  EXPECT_EQ(t.embed_tokens.shape, (std::vector<int64_t>{1024, 128}));
  EXPECT_EQ(t.embed_tokens_per_layer->shape[0], 1024);
  EXPECT_EQ(d.embed_tokens.shape[0], 1024);
  EXPECT_EQ(d.token_ordering->shape[0], 1024);
  EXPECT_TRUE(check_drafter_compat(t.config, d.config).empty());
}

// ---- full-size inventories (planned, validated, never written) -----------------------------------

struct FullSize {
  uint64_t params, bytes, per_token, drafter_bytes;
};

FullSize check_full_size(const std::string& preset, const CheckpointVariant& v) {
  SCOPED_TRACE(preset + " " + v.label);
  const SynthOptions o = options_for(preset, v);
  const synth::CheckpointPlan tp = synth::plan_target(o);
  const synth::CheckpointPlan dp = synth::plan_drafter(o);
  const std::string dir = "/synthetic/" + preset;
  const TargetCheckpoint t =
      load_target(tp.config, dir + "/config.json", TensorStore::from_views(dir, synth::plan_views(tp)));
  const DrafterCheckpoint d = load_drafter(dp.config, dir + "-drafter/config.json",
                                           TensorStore::from_views(dir + "-drafter", synth::plan_views(dp)));
  const CheckpointSummary s = summarize_checkpoint(t, &d);
  EXPECT_EQ(s.parameters, expected_target_params(synth::find_preset(preset).text, v.naming));
  EXPECT_EQ(s.tensor_bytes, tp.data_bytes());
  EXPECT_EQ(s.bytes_per_token, expected_bytes_per_token(t.store, t.config.text, t.prefix));
  EXPECT_TRUE(s.drafter->compat_problems.empty())
      << (s.drafter->compat_problems.empty() ? "" : s.drafter->compat_problems[0]);
  EXPECT_EQ(s.drafter->parameters, expected_drafter_params(synth::find_preset(preset), 262144));
  std::cout << fmt::format(
      "  {:8} {:10} params {:>14} ({:.2f} B)  tensors {:>12}  per token {:>12}  KV f32 {} B/token full + "
      "{} sliding  drafter {} B ({} params)\n",
      preset, v.label, s.parameters, s.parameters / 1e9, s.tensor_bytes, s.bytes_per_token, s.kv_bytes_per_token_full,
      format_bytes(s.kv_bytes_sliding_total), s.drafter->tensor_bytes, s.drafter->parameters);
  return {s.parameters, s.tensor_bytes, s.bytes_per_token, s.drafter->tensor_bytes};
}

TEST(SynthFullSize, InventoriesValidateAndCountsArePlausible) {
  const CheckpointVariant bf16 = checkpoint_variants()[0];
  const CheckpointVariant q4 = checkpoint_variants()[3];
  std::map<std::string, FullSize> b, q;
  for (const auto& p : kFullPresets) {
    b[p] = check_full_size(p, bf16);
    q[p] = check_full_size(p, q4);
    EXPECT_LT(q[p].bytes, b[p].bytes * 0.35);  // 4-bit g64: 4.5 bits per weight vs 16
  }
  // Published totals of the text stacks: E2B 5.1B and E4B 8B "with embeddings" include the vision
  // and audio encoders (~0.5B); 26B-A4B 25.2B total / 3.8B active; 31B 30.7B.
  EXPECT_GT(b["e2b"].params, 4.2e9);
  EXPECT_LT(b["e2b"].params, 5.1e9);
  EXPECT_GT(b["e4b"].params, 7.0e9);
  EXPECT_LT(b["e4b"].params, 8.0e9);
  EXPECT_GT(b["26b-a4b"].params, 24.5e9);
  EXPECT_LT(b["26b-a4b"].params, 26.0e9);
  EXPECT_GT(b["31b"].params, 29.5e9);
  EXPECT_LT(b["31b"].params, 31.5e9);
  EXPECT_GT(b["12b"].params, 10.5e9);
  EXPECT_LT(b["12b"].params, 13.0e9);
  // Active parameters of the MoE (bf16 bytes per token / 2) near the published 3.8B.
  EXPECT_GT(b["26b-a4b"].per_token / 2, 3.3e9);
  EXPECT_LT(b["26b-a4b"].per_token / 2, 4.3e9);
  // The real E4B-assistant file is 159 138 208 bytes: our tensors plus a header of a few KB.
  EXPECT_EQ(b["e4b"].drafter_bytes, 159'132'680u);
  EXPECT_LT(159'138'208u - b["e4b"].drafter_bytes, 16'384u);
}

TEST(SynthFullSize, KvSharingMapsMatchTheSpec) {
  const auto load = [](const std::string& preset) {
    const auto plan = synth::plan_target(options_for(preset, checkpoint_variants()[3]));
    return load_target(plan.config, "/synthetic/config.json",
                       TensorStore::from_views("/synthetic", synth::plan_views(plan)));
  };
  const TargetCheckpoint e2b = load("e2b"), e4b = load("e4b"), moe = load("26b-a4b");
  EXPECT_EQ(e2b.config.last_sliding_donor, 13);
  EXPECT_EQ(e2b.config.last_full_donor, 14);
  EXPECT_EQ(e2b.layers[20].gate_proj.shape[0], 12288);  // double-wide in KV-shared layers
  EXPECT_EQ(e4b.config.last_sliding_donor, 22);
  EXPECT_EQ(e4b.config.last_full_donor, 23);
  EXPECT_EQ(moe.config.last_sliding_donor, 28);
  EXPECT_EQ(moe.config.last_full_donor, 29);
  // E4B's 4-bit g64 packed widths: in·4/32 words and in/64 scales per row (docs/gemma4.md §4).
  EXPECT_EQ(e4b.embed_tokens.weight->shape, (std::vector<int64_t>{262144, 320}));
  EXPECT_EQ(e4b.embed_tokens_per_layer->weight->shape, (std::vector<int64_t>{262144, 1344}));
  EXPECT_EQ(e4b.embed_tokens_per_layer->scales->shape, (std::vector<int64_t>{262144, 168}));
  EXPECT_EQ(e4b.layers[5].q_proj.weight->shape, (std::vector<int64_t>{4096, 320}));
  EXPECT_EQ(e4b.layers[0].down_proj.weight->shape, (std::vector<int64_t>{2560, 1280}));
  EXPECT_EQ(e4b.layers[0].per_layer_projection->scales->shape, (std::vector<int64_t>{2560, 4}));
  const CheckpointSummary s = summarize_checkpoint(e4b);
  EXPECT_EQ(s.kv_bytes_per_token_full, 4u * 2 * 2 * 512 * 4);
  EXPECT_EQ(s.kv_bytes_sliding_total, 20u * 2 * 2 * 256 * 4 * 512);
}

// ---- progress bar --------------------------------------------------------------------------------

TEST(SynthProgress, RendersAndStaysQuietOffTerminals) {
  EXPECT_EQ(ProgressBar::render("w", 0, 100, 0.0, 10), "w [..........]   0%  0 B / 100 B");
  const std::string half = ProgressBar::render("writing", 1'500'000'000, 3'000'000'000, 2.0, 10);
  EXPECT_TRUE(contains(half, "[#####.....]  50%  1.50 GB / 3.00 GB  750 MB/s  ETA 2s")) << half;
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar quiet("x", 10, ProgressBar::Mode::Auto, f);  // a file is not a terminal
    EXPECT_FALSE(quiet.enabled());
    quiet.update(5);
    quiet.finish();
  }
  EXPECT_EQ(std::ftell(f), 0);
  {
    ProgressBar loud("x", 10, ProgressBar::Mode::Always, f);
    loud.update(5);
    loud.finish();
  }
  std::rewind(f);
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string out(buf, n);
  EXPECT_TRUE(contains(out, " 50%")) << out;
  EXPECT_TRUE(contains(out, "100%")) << out;
  EXPECT_EQ(out.back(), '\n');
}

// ---- the specula binary ---------------------------------------------------------------------------

struct CliRun {
  int code;
  std::string out, err;
};

// Runs the CLI with `args`; its stdout and stderr apart.
CliRun run_cli_split_output(const std::string& args) {
  static int counter = 0;
  const std::string base = scratch().path(fmt::format("cli-{}", counter++));
  const std::string cmd = fmt::format("'{}' {} >'{}.out' 2>'{}.err'", SPECULA_BINARY, args, base, base);
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(base + ".out"), read_file(base + ".err")};
}

TEST(SynthCli, SynthAndInspectThroughTheBinary) {
  const std::string model = scratch().path("cli-model"), draft = scratch().path("cli-draft");
  CliRun r = run_cli_split_output(
      fmt::format("synth --preset tiny-moe --out '{}' --bits 4 --seed 5 --drafter '{}'", model, draft));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "wrote " + model)) << r.out;
  EXPECT_TRUE(contains(r.out, "4-bit group 64, mlx naming")) << r.out;
  EXPECT_EQ(r.err, "");  // no progress bar off a terminal

  r = run_cli_split_output(fmt::format("inspect '{}' --draft '{}' --json", model, draft));
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const TargetCheckpoint t = load_target(model);
  EXPECT_EQ(j["parameters"].get<uint64_t>(), summarize_checkpoint(t).parameters);
  EXPECT_EQ(j["parameters"].get<uint64_t>(), expected_target_params(synth::find_preset("tiny-moe").text, Naming::Mlx));
  EXPECT_EQ(j["prefix"], "language_model.model.");
  EXPECT_EQ(j["variant"]["moe"], true);
  EXPECT_EQ(j["drafter"]["compatible"], true);
  EXPECT_EQ(j["drafter"]["head"], "dense");

  r = run_cli_split_output(fmt::format("inspect '{}' --draft '{}'", model, draft));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "MoE: yes (8 experts, top 2, width 64)")) << r.out;
  EXPECT_TRUE(contains(r.out, "router.proj")) << r.out;
  EXPECT_TRUE(contains(r.out, "q8g64")) << r.out;
  EXPECT_TRUE(contains(r.out, "compatible  yes")) << r.out;

  // Sharded through the CLI, then inspected.
  const std::string sharded = scratch().path("cli-sharded");
  r = run_cli_split_output(
      fmt::format("synth --preset tiny-dense --out '{}' --naming mlx --max-shard-bytes 200000", sharded));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(sharded + "/model.safetensors.index.json"));
  EXPECT_EQ(run_cli_split_output(fmt::format("inspect '{}'", sharded)).code, 0);
}

TEST(SynthCli, ExitCodesAndMessages) {
  const std::string out = scratch().path("cli-err");
  CliRun r = run_cli_split_output(fmt::format("synth --preset nope --out '{}'", out));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "tiny-dense") && contains(r.err, "26b-a4b")) << r.err;
  r = run_cli_split_output(fmt::format("synth --preset tiny-dense --out '{}' --bits 7", out));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "7") && contains(r.err, "8")) << r.err;
  r = run_cli_split_output(fmt::format("synth --preset tiny-dense --out '{}' --bits 4 --group-size 48", out));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "48") && contains(r.err, "128")) << r.err;
  r = run_cli_split_output(fmt::format("synth --preset tiny-dense --out '{}' --group-size 64", out));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--bits")) << r.err;
  r = run_cli_split_output("synth --preset tiny-dense");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--out")) << r.err;
  r = run_cli_split_output(fmt::format("synth --preset tiny-dense --out '{}' --vocab 1000 --drafter '{}-d'", out, out));
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "error:") && contains(r.err, "num_centroids")) << r.err;
  EXPECT_FALSE(fs::exists(out + "/model.safetensors"));  // planned both before writing either
  r = run_cli_split_output(fmt::format("inspect '{}'", scratch().path("does-not-exist")));
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "error:") && contains(r.err, "does-not-exist")) << r.err;
  r = run_cli_split_output("inspect");
  EXPECT_EQ(r.code, 2);
}

}  // namespace
}  // namespace specula
