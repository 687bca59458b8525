#include "specula/model/gguf_image_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "specula/util/cache_key.h"
#include "specula/util/error.h"

namespace specula {

namespace fs = std::filesystem;

namespace {

// Writes `text` to `path` through a temporary file renamed over it.
void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temp = fmt::format("{}.tmp-{}", path, ::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      std::error_code ec;
      fs::remove(temp, ec);
      fail("cannot write {}", temp);
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    fs::remove(temp, ec);
    fail("cannot rename {} to {}: {}", temp, path, ec.message());
  }
}

}  // namespace

const char* gguf_image_source_name(GgufImageSource source) {
  switch (source) {
    case GgufImageSource::None: return "none";
    case GgufImageSource::Memory: return "in memory";
    case GgufImageSource::CacheHit: return "cache hit";
    case GgufImageSource::CacheWritten: return "cache written";
    case GgufImageSource::Described: return "described";
  }
  return "none";
}

std::string gguf_image_cache_dir(const std::string& packed_cache_dir) {
  return packed_cache_dir.empty() ? std::string() : (fs::path(packed_cache_dir) / "gguf").string();
}

GgufImageEntry gguf_image_entry(const std::string& cache_dir, const std::string& gguf_file) {
  const std::string path = absolute_path(gguf_file);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("{}: cannot read the file's size and time", gguf_file);
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  GgufImageEntry e;
  e.dir = (fs::path(cache_dir) / fmt::format("{:016x}", fnv1a64(path))).string();
  e.image = (fs::path(e.dir) / "model.safetensors").string();
  e.key_file = (fs::path(e.dir) / "image.json").string();
  e.identity = fmt::format("gguf image version {}\nfile {} size {} mtime_ns {} inode {} dev {}\n", kGgufImageVersion,
                           path, static_cast<int64_t>(st.st_size), mtime_ns, static_cast<uint64_t>(st.st_ino),
                           static_cast<uint64_t>(st.st_dev));
  return e;
}

std::optional<nlohmann::json> find_gguf_image(const GgufImageEntry& entry) {
  std::ifstream in(entry.key_file, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json key = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!key.is_object()) return std::nullopt;
  const auto identity = key.find("key");
  const auto bytes = key.find("image_bytes");
  const auto quantization = key.find("quantization");
  if (identity == key.end() || !identity->is_string() || identity->get<std::string>() != entry.identity)
    return std::nullopt;
  if (bytes == key.end() || !bytes->is_number_unsigned() || quantization == key.end()) return std::nullopt;
  std::error_code ec;
  const uintmax_t size = fs::file_size(entry.image, ec);
  if (ec || size != bytes->get<uint64_t>()) return std::nullopt;
  return *quantization;
}

std::string gguf_image_temp_path(const GgufImageEntry& entry) {
  std::error_code ec;
  fs::create_directories(entry.dir, ec);
  if (ec) fail("cannot create the GGUF image cache directory {}: {}", entry.dir, ec.message());
  return fmt::format("{}.tmp-{}", entry.image, ::getpid());
}

void commit_gguf_image(const GgufImageEntry& entry, const std::string& temp_image, const nlohmann::json& quantization) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(temp_image, ec);
  if (!ec) fs::rename(temp_image, entry.image, ec);
  if (ec) {
    fs::remove(temp_image, ec);
    fail("cannot move the GGUF image {} into place: {}", temp_image, ec.message());
  }
  const nlohmann::json key = {
      {"key", entry.identity}, {"image_bytes", static_cast<uint64_t>(bytes)}, {"quantization", quantization}};
  write_file_atomically(entry.key_file, key.dump(1));
}

}  // namespace specula
