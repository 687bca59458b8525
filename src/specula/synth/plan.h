#pragma once
// A synthetic checkpoint described before anything is written: its config.json,
// generation_config.json and tensor inventory, each tensor with a fill function that derives its
// bytes from (seed, tensor, element) alone. Writing it (writer.h) streams the fills to disk; tests
// can also validate a full-size inventory without writing it (plan_views + TensorStore::from_views).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/io/config.h"
#include "specula/io/dtype.h"
#include "specula/io/safetensors.h"
#include "specula/synth/presets.h"

namespace specula::synth {

// hf: prefix `model.language_model.`, MoE experts as the fused `experts.gate_up_proj` parameter and
//     the unused K/V projections of KV-shared layers kept (as HF originals ship them). Quantized,
//     the fused stack becomes `experts.gate_up_proj.{weight,scales,biases}` (no upstream writes
//     that form; the loader accepts it, which lets tests cover both expert layouts quantized).
// mlx: prefix `language_model.model.`, experts split into `experts.switch_glu.*`, shared layers
//     without K/V (as mlx-lm conversions write them).
enum class Naming { Hf, Mlx };
const char* naming_name(Naming n);  // "hf" / "mlx"

struct SynthOptions {
  std::string preset = "tiny-dense";
  uint64_t seed = 0;
  DType dtype = DType::BF16;       // dense weights, norms, and the scales/biases: BF16 or F32
  std::optional<QuantSpec> quant;  // MLX affine quantization of the target's linears
  std::optional<Naming> naming;    // default: Mlx when quantized, Hf otherwise
  std::optional<int64_t> vocab;    // overrides the preset's vocabulary (and the PLE vocab)
  bool with_towers = false;        // also the vision / audio tower tensors (synth/towers.h)

  Naming resolved_naming() const { return naming.value_or(quant ? Naming::Mlx : Naming::Hf); }
};

struct CheckpointPlan {
  nlohmann::json config;             // config.json
  nlohmann::json generation_config;  // generation_config.json
  nlohmann::json processor_config;   // processor_config.json (null: none, a text-only checkpoint)
  std::vector<TensorSpec> tensors;   // by module path; quantized: weight, scales, biases

  uint64_t data_bytes() const;  // sum of tensor byte sizes (excludes headers)
};

// Checks the options (preset, bits, group size, dtype, vocab, towers) and throws specula::Error naming the
// option and the allowed values.
void validate_options(const SynthOptions& options);

// The target checkpoint of a preset.
CheckpointPlan plan_target(const SynthOptions& options);

// The matching "-assistant" drafter (bf16, unquantized, no prefix) for the same options.
CheckpointPlan plan_drafter(const SynthOptions& options);

// Data-less views of the plan's tensors (data == nullptr, nbytes set), for TensorStore::from_views.
std::vector<TensorView> plan_views(const CheckpointPlan& plan);

// Bytes of one tensor described by dtype and shape.
uint64_t tensor_bytes(DType dtype, const std::vector<int64_t>& shape);

}  // namespace specula::synth
