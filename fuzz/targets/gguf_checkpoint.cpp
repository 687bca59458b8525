// Fuzz entry: a GGUF file through the checkpoint loaders (model/gguf_target.h), which map its
// metadata to a config, check the tensor list against the model's and lay the tensors out as a
// safetensors image: converted (ggml blocks repacked into MLX affine codes, scales and biases) or
// described (the layout from the tensor list alone, as `inspect` does). The input is written to a
// per-process temp file, since the loaders map files.
//
// Input: byte 0 = flags, the rest is the .gguf file.
// flags bit 0: the gemma4-assistant drafter loader instead of the gemma4 target's.
// flags bit 1: describe instead of converting.
// The seeds are tiny synthetic drafters (`specula synth --preset tiny-e4b --format gguf --quant Q
// --drafter F`) in several block types, so mutations reach the conversion of each, and a tiny
// target (`--preset tiny-dense --vocab 256 --quant q4_0`), so they reach the target's checks too.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_entries.h"
#include "specula/model/gguf_target.h"
#include "specula/util/error.h"

namespace specula::fuzz {

int fuzz_gguf_checkpoint(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  namespace fs = std::filesystem;
  const fs::path file = fs::temp_directory_path() / ("specula-fuzz-" + std::to_string(getpid()) + ".gguf");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  GgufLoadOptions options;
  options.convert = (flags & 2) == 0;
  try {
    if (flags & 1) {
      const DrafterCheckpoint d = load_gguf_drafter(file.string(), options);
      (void)d;
    } else {
      const TargetCheckpoint t = load_gguf_target(file.string(), options);
      (void)t;
    }
  } catch (const specula::Error& e) {
    // For corpus work: which check stopped an input (the seeds should load without any).
    if (std::getenv("SPECULA_FUZZ_VERBOSE")) std::fprintf(stderr, "gguf_checkpoint: %s\n", e.what());
  }
  std::error_code ec;
  fs::remove(file, ec);
  return 0;
}

}  // namespace specula::fuzz
