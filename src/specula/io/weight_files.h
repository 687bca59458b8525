#pragma once
// Which files of a checkpoint hold its weights. A checkpoint is a directory (config.json beside
// the weights) or one `.safetensors` file whose config.json sits in the same directory. In a
// directory without `model.safetensors.index.json` only model shards are weights: a sidecar such as
// `optiq_vision.safetensors` holds other modules and is never opened.
#include <string>

#include "specula/io/safetensors.h"

namespace specula {

// `model.safetensors` or `model-<digits>-of-<digits>.safetensors` (Hugging Face's shard names).
bool is_model_shard_name(const std::string& name);

// Whether `path` names one weight file (an existing `*.safetensors` file) rather than a directory.
bool is_weight_file_path(const std::string& path);

// The directory holding a model's config.json, tokenizer and chat template: `path` itself, or the
// directory of a file given as the model (one `.safetensors` or `.gguf` file).
std::string model_files_dir(const std::string& path);

// The tensors of a checkpoint path: the one file, or TensorStore::open_dir of the directory.
TensorStore open_weights(const std::string& path);

}  // namespace specula
