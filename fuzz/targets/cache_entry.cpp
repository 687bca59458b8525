// Fuzz entry: the cache inventory (model/cache_inventory.h) over one entry written from the input
// into a per-process temporary cache directory, listed and never pruned. Byte 0: bit 0 clear ->
// the rest is a GGUF image folder's image.json; set -> a packed-weight file, whole (bit 1 clear)
// or, with bit 1 set, the rest as the identity key behind a valid header (the mutator rarely
// builds one), the file extended to its data offset.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_entries.h"
#include "specula/model/cache_inventory.h"
#include "specula/model/packed_cache_file.h"
#include "specula/util/error.h"

namespace specula::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path& cache_dir() {
  static const fs::path dir = fs::temp_directory_path() / ("specula-fuzz-cache-" + std::to_string(getpid()));
  return dir;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int fuzz_cache_entry(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::error_code ec;
  fs::remove_all(cache_dir(), ec);
  fs::create_directories(cache_dir() / "gguf" / "0123456789abcdef", ec);
  if (ec) return 0;
  if ((data[0] & 1) == 0) {
    write_file(cache_dir() / "gguf" / "0123456789abcdef" / "image.json", rest);
    write_file(cache_dir() / "gguf" / "0123456789abcdef" / "model.safetensors", "image");
  } else {
    const fs::path file = cache_dir() / (std::string("fedcba9876543210") + kPackedCacheSuffix);
    if ((data[0] & 2) == 0) {
      write_file(file, rest);
    } else {
      const std::vector<uint8_t> header = packed_file_header(rest, 0);
      write_file(file, std::string(header.begin(), header.end()));
      fs::resize_file(file, packed_data_offset(rest), ec);
    }
  }
  try {
    for (const CacheEntry& e : list_cache(cache_dir().string())) {
      (void)cache_entry_kind_name(e.kind);
      (void)cache_entry_state_name(e.state);
    }
  } catch (const specula::Error&) {
  }
  fs::remove_all(cache_dir(), ec);
  return 0;
}

}  // namespace specula::fuzz
