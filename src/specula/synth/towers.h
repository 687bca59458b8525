#pragma once
// The vision and audio tower tensors of the multimodal checkpoints (`synth --with-towers`), with
// the names and shapes the released checkpoints use (docs/gemma4.md §3.4), and the
// vision_config / audio_config / processor_config.json that describe them. Text generation never
// reads these tensors; they exist so that loading, `inspect` and page-residency tests see a
// checkpoint laid out as the real ones are.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/synth/presets.h"

namespace specula::synth {

struct TowerTensor {
  enum class Kind {
    Linear,     // [out, in] (or a conv kernel [out, in, ...]) drawn like a linear of width `in`
    Norm,       // a norm's multiplier
    Table,      // the patch position table
    ClipBound,  // a clipped linear's input/output bound (a 0-d scalar)
    Bias,
  };
  std::string name;  // as stored, e.g. "model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight"
  std::vector<int64_t> shape;
  Kind kind = Kind::Linear;
  bool lower_bound = false;  // ClipBound: *_min (true) or *_max
};

// Every tower tensor of `preset` (vision, then audio), for a text model of width `text_hidden`.
// `hf_naming`: under `model.` (as Hugging Face originals); else without it (as MLX conversions).
// Empty when the preset has no towers.
std::vector<TowerTensor> tower_tensors(const Preset& preset, int64_t text_hidden, bool hf_naming);

nlohmann::json vision_config_json(const VisionTowerPreset& vision);
nlohmann::json audio_config_json(const AudioTowerPreset& audio);
// A processor_config.json naming the image (and audio) front ends of the towers.
nlohmann::json processor_config_json(const Preset& preset);

}  // namespace specula::synth
