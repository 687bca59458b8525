#pragma once
// GGUF checkpoints (docs/gguf.md): a `gemma4` .gguf file (or a directory holding exactly one)
// becomes the same validated TargetCheckpoint a safetensors directory does, and a
// `gemma4-assistant` file the same DrafterCheckpoint: their tensors are
// laid out at load as an in-memory safetensors image (float tensors copied as they are, ggml
// blocks with an exact affine group-32 form repacked into MLX affine layout by
// kernels/ggml_affine.h, Q6_K dequantized to f32; other types refused by name).
#include <optional>
#include <string>

#include "specula/io/checkpoint.h"

namespace specula {

// The .gguf file `path` names: `path` itself when it is a regular file ending in `.gguf` or
// starting with GGUF's magic (an Ollama blob); for a directory without config.json, its one
// `*.gguf` file (several: an error listing them). nullopt for anything else (a safetensors
// directory, a missing path: the safetensors loader reports it).
std::optional<std::string> gguf_file_of(const std::string& path);

// Loads and validates a GGUF target. Errors name the file and the GGUF key or tensor.
TargetCheckpoint load_gguf_target(const std::string& file);

// A checkpoint directory, a .gguf file or a directory holding one .gguf file.
TargetCheckpoint load_any_target(const std::string& path);

// Loads and validates a `gemma4-assistant` drafter GGUF (docs/gguf.md §8) into the checkpoint a
// safetensors drafter directory gives, with the dense tied head. Errors name the file and the GGUF
// key or tensor.
DrafterCheckpoint load_gguf_drafter(const std::string& file);

// A drafter checkpoint directory, a .gguf file or a directory holding one .gguf file.
DrafterCheckpoint load_any_drafter(const std::string& path);

}  // namespace specula
