#pragma once
// The packed-weight cache's file format and the identity of the checkpoint a file was made from
// (model/packed_cache.h uses them to read and write the files, model/cache_inventory.h to list
// them). A file: fixed header (magic "SPECPACK", u32 layout version, u32 zero, u64 key bytes, u64
// data offset, u64 data bytes; little-endian), the identity key text, zeros up to the data offset
// (the header and key rounded up to 2 MiB), then the data.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specula {

// Bump whenever the packed layout (kernels/packed_affine.h) or this file's format changes.
inline constexpr uint32_t kPackedLayoutVersion = 2;
inline constexpr char kPackedCacheSuffix[] = ".specula-packed";

// The cache file of a checkpoint directory inside cache_dir: <hash of its absolute path><suffix>.
std::string packed_cache_file(const std::string& cache_dir, const std::string& checkpoint_dir);

// The identity lines of a checkpoint directory's files in a key ("file NAME size ... dev ...\n"
// for config.json, the index and every .safetensors file, sorted); empty when the directory
// cannot be listed or holds none of them.
std::string packed_cache_file_lines(const std::string& checkpoint_dir);

// Where the data of a file with this key starts.
uint64_t packed_data_offset(const std::string& key);
// The fixed header and the key of a file holding data_bytes of data (at the current version).
std::vector<uint8_t> packed_file_header(const std::string& key, uint64_t data_bytes);

struct PackedFileHeader {
  uint32_t version = 0;
  std::string key;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
};
// The header of an open file, when it is one of this format whose sizes fit the file (the key
// after the fixed header, the data after the key and up to the end); nullopt otherwise.
std::optional<PackedFileHeader> read_packed_file_header(int fd);
std::optional<PackedFileHeader> read_packed_file_header(const std::string& path);

}  // namespace specula
