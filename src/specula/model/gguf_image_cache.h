#pragma once
// A disk cache of GGUF checkpoints' converted images (model/gguf_target.h). Converting a
// multi-GB GGUF into the safetensors layouts specula runs costs tens of seconds on every load,
// and an image held in memory stays resident beside everything built from it; an image written
// once to a file is mapped like any safetensors checkpoint from then on (pages the kernel may drop
// and read again), and its packed layout is cached as a directory's is (model/packed_cache.h).
//
// One directory per GGUF file: <cache dir>/<hash of the file's absolute path>/ holding
//   model.safetensors  the image
//   image.json         {"key": identity, "image_bytes": size of the image, "quantization": {...}}
// The identity names the GGUF file's absolute path, size, mtime, inode and device, and
// kGgufImageVersion. An entry whose image.json is missing, unreadable or of another identity, or
// whose image has another size, is a miss: the image is converted and written again. Both files
// are written under process-unique temporary names and renamed into place, the image first.
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "specula/io/checkpoint.h"

namespace specula {

// Bump whenever the conversion (model/gguf_target.cpp, kernels/ggml_affine.h) changes its output.
inline constexpr int kGgufImageVersion = 4;

// "none", "in memory", "cache hit", "cache written", "described"
const char* gguf_image_source_name(GgufImageSource source);

struct GgufImageEntry {
  std::string dir;       // the entry's directory
  std::string image;     // dir/model.safetensors
  std::string key_file;  // dir/image.json
  std::string identity;  // the GGUF file's identity text
};

// The image cache directory beside a packed-weight cache directory (model/packed_cache.h): its
// gguf/ folder, so that one setting (SPECULA_PACKED_CACHE, SPECULA_CACHE_DIR, ...) places or
// disables both. Empty for an empty one.
std::string gguf_image_cache_dir(const std::string& packed_cache_dir);

// The entry of `gguf_file` under `cache_dir`; reads the file's identity now (throws
// specula::Error when it cannot be read).
GgufImageEntry gguf_image_entry(const std::string& cache_dir, const std::string& gguf_file);

// The quantization block recorded with a matching image; nullopt on a miss.
std::optional<nlohmann::json> find_gguf_image(const GgufImageEntry& entry);

// A process-unique temporary path in the entry's directory, which is created (throws
// specula::Error when it cannot be).
std::string gguf_image_temp_path(const GgufImageEntry& entry);

// Renames the image written at `temp_image` into place and records its key with `quantization`.
// Throws specula::Error when either step fails (the temporary files are removed).
void commit_gguf_image(const GgufImageEntry& entry, const std::string& temp_image, const nlohmann::json& quantization);

}  // namespace specula
