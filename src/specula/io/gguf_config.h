#pragma once
// The model config of a `gemma4` GGUF file (or a `gemma4-assistant` drafter): its metadata
// (llama.cpp's keys) mapped onto the config.json keys the safetensors path reads (docs/gguf.md §2,
// §8), so both paths validate and build the same TargetConfig / DrafterConfig.
#include <nlohmann/json_fwd.hpp>

#include "specula/io/gguf.h"

namespace specula {

// The config.json equivalent (a flat `gemma4_text` config, plus a `quantization` block added by
// the tensor loader when it converts quantized tensors). Throws naming the file and the GGUF key
// (or tensor, for `rope_freqs`) on a missing key, a wrong type, a per-layer array of the wrong
// length, or values Gemma 4 cannot have (e.g. different key and value lengths).
nlohmann::json gguf_target_config(const GgufFile& file);

// The config.json equivalent of a `gemma4-assistant` drafter (docs/gguf.md §8): the same text keys
// under the drafter's prefix as `text_config`, `backbone_hidden_size` from `embedding_length_out`,
// and the dense head (llama.cpp's converter drops the centroid tensors). Throws naming the file and
// the GGUF key, also for what a drafter cannot have (own KV layers, experts, per-layer inputs).
nlohmann::json gguf_drafter_config(const GgufFile& file);

// The `rope_freqs` values of a proportional full-attention RoPE with `rotated` of `half_dim`
// pairs rotated at `factor` (the other pairs get a huge factor, i.e. no rotation): what
// llama.cpp's converter writes and gguf_target_config reads back.
std::vector<float> proportional_rope_freqs(int64_t half_dim, int64_t rotated, float factor);

}  // namespace specula
