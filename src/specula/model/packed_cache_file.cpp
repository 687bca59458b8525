#include "specula/model/packed_cache_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "specula/util/cache_key.h"

namespace specula {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'S', 'P', 'E', 'C', 'P', 'A', 'C', 'K'};
constexpr uint64_t kFixedHeader = 40;
constexpr uint64_t kMaxKeyBytes = uint64_t{64} << 20;  // far above any real model's key
constexpr uint64_t kDataAlign = uint64_t{2} << 20;     // data offsets are 2 MiB multiples (huge pages)

void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }  // x86/arm64 hosts: little-endian
void store_u64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

bool pread_all(int fd, void* out, uint64_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, static_cast<size_t>(std::min<uint64_t>(n, 1u << 30)), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

bool is_identity_file(const std::string& name) {
  const std::string ext = ".safetensors";
  return name == "config.json" || name == "model.safetensors.index.json" ||
         (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0);
}

}  // namespace

std::string packed_cache_file(const std::string& cache_dir, const std::string& checkpoint_dir) {
  return (fs::path(cache_dir) / fmt::format("{:016x}{}", fnv1a64(absolute_path(checkpoint_dir)), kPackedCacheSuffix))
      .string();
}

std::string packed_cache_file_lines(const std::string& checkpoint_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(checkpoint_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_identity_file(name)) names.push_back(name);
  }
  if (ec || names.empty()) return {};
  std::sort(names.begin(), names.end());
  std::string lines;
  for (const std::string& name : names) {
    struct stat st {};
    if (::stat((fs::path(checkpoint_dir) / name).c_str(), &st) != 0) return {};
    const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    lines += fmt::format("file {} size {} mtime_ns {} inode {} dev {}\n", name, static_cast<int64_t>(st.st_size),
                         mtime_ns, static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_dev));
  }
  return lines;
}

uint64_t packed_data_offset(const std::string& key) {
  return (kFixedHeader + key.size() + kDataAlign - 1) / kDataAlign * kDataAlign;
}

std::vector<uint8_t> packed_file_header(const std::string& key, uint64_t data_bytes) {
  std::vector<uint8_t> h(kFixedHeader + key.size());
  std::memcpy(h.data(), kMagic, 8);
  store_u32(h.data() + 8, kPackedLayoutVersion);
  store_u32(h.data() + 12, 0);
  store_u64(h.data() + 16, key.size());
  store_u64(h.data() + 24, packed_data_offset(key));
  store_u64(h.data() + 32, data_bytes);
  std::memcpy(h.data() + kFixedHeader, key.data(), key.size());
  return h;
}

std::optional<PackedFileHeader> read_packed_file_header(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0) return std::nullopt;
  const auto file_size = static_cast<uint64_t>(st.st_size);
  uint8_t fixed[kFixedHeader];
  if (file_size < kFixedHeader || !pread_all(fd, fixed, kFixedHeader, 0)) return std::nullopt;
  if (std::memcmp(fixed, kMagic, 8) != 0 || load_u32(fixed + 12) != 0) return std::nullopt;
  PackedFileHeader h;
  h.version = load_u32(fixed + 8);
  const uint64_t key_bytes = load_u64(fixed + 16);
  h.data_offset = load_u64(fixed + 24);
  h.data_bytes = load_u64(fixed + 32);
  // Every size is checked against the file's before use (no sum can overflow: each is below it).
  if (key_bytes > kMaxKeyBytes || key_bytes > file_size - kFixedHeader) return std::nullopt;
  if (h.data_offset < kFixedHeader + key_bytes || h.data_offset > file_size) return std::nullopt;
  if (h.data_bytes != file_size - h.data_offset) return std::nullopt;
  h.key.resize(static_cast<size_t>(key_bytes));
  if (!pread_all(fd, h.key.data(), key_bytes, kFixedHeader)) return std::nullopt;
  return h;
}

std::optional<PackedFileHeader> read_packed_file_header(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<PackedFileHeader> h = read_packed_file_header(fd);
  ::close(fd);
  return h;
}

}  // namespace specula
