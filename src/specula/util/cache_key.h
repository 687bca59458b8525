#pragma once
// Building blocks of the on-disk caches' names and keys (model/packed_cache.h,
// model/gguf_image_cache.h): a stable 64-bit hash of a text and a path's absolute, normalized form.
#include <cstdint>
#include <string>
#include <string_view>

namespace specula {

// FNV-1a, 64-bit: the same value on every host and build.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// `path` made absolute, symlinks resolved where they exist, without a trailing '/'.
std::string absolute_path(const std::string& path);

}  // namespace specula
