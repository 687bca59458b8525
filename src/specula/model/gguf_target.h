#pragma once
// GGUF checkpoints (docs/gguf.md): a `gemma4` .gguf file (or a directory holding exactly one)
// becomes the same validated TargetCheckpoint a safetensors directory does, and a
// `gemma4-assistant` file the same DrafterCheckpoint: their tensors are laid out at load as a
// safetensors image (float tensors copied as they are, ggml blocks repacked into their exact MLX
// affine form by kernels/ggml_affine.h; other types refused by name), in memory or, with an image
// cache directory, in a file that later loads map as they are (model/gguf_image_cache.h).
#include <cstdint>
#include <optional>
#include <string>

#include "specula/io/checkpoint.h"

namespace specula {

// The .gguf file `path` names: `path` itself when it is a regular file ending in `.gguf` or
// starting with GGUF's magic (an Ollama blob); for a directory without config.json, its one
// `*.gguf` file (several: an error listing them). nullopt for anything else (a safetensors
// directory, a missing path: the safetensors loader reports it).
std::optional<std::string> gguf_file_of(const std::string& path);

struct GgufLoadOptions {
  // Where converted images are kept between loads (model/gguf_image_cache.h); empty: convert into
  // memory on every load.
  std::string image_cache_dir;
  // Smaller GGUF files are converted in memory (in milliseconds) and leave nothing behind.
  uint64_t min_cached_file_bytes = 64ull << 20;
  // false: where no current image is cached, describe the file instead of converting it (in
  // milliseconds, nothing read but the metadata, the tensor list and the 1-d tensors, nothing
  // written): the checkpoint validates as a converted one and has the same tensor names, shapes
  // and formats (those of well-formed blocks: docs/gguf.md §4), but its other tensors read as
  // zeros. For summaries (`inspect`), never for running the model.
  bool convert = true;
};

// Loads and validates a GGUF target. Errors name the file and the GGUF key or tensor.
TargetCheckpoint load_gguf_target(const std::string& file, const GgufLoadOptions& options = {});

// A checkpoint directory, a .gguf file or a directory holding one .gguf file.
TargetCheckpoint load_any_target(const std::string& path, const GgufLoadOptions& options = {});

// Loads and validates a `gemma4-assistant` drafter GGUF (docs/gguf.md §8) into the checkpoint a
// safetensors drafter directory gives, with the dense tied head. Errors name the file and the GGUF
// key or tensor.
DrafterCheckpoint load_gguf_drafter(const std::string& file, const GgufLoadOptions& options = {});

// A drafter checkpoint directory, a .gguf file or a directory holding one .gguf file.
DrafterCheckpoint load_any_drafter(const std::string& path, const GgufLoadOptions& options = {});

}  // namespace specula
