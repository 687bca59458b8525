#include "specula/model/packed_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "specula/io/dtype.h"
#include "specula/util/alignment.h"
#include "specula/util/cache_key.h"
#include "specula/util/error.h"
#include "specula/util/mapped_file.h"

namespace specula {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMatrixAlign = 64;                       // as pack_matrices() lays the matrices out
constexpr uint64_t kFreeSpaceMargin = uint64_t{256} << 20;  // leave the disk this much after writing

// Returns 0 or the errno of the failure (ENOSPC for a write that made no progress).
int pwrite_all(int fd, const void* data, uint64_t n, uint64_t offset) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t r =
        ::pwrite(fd, p, static_cast<size_t>(std::min<uint64_t>(n, 64u << 20)), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return ENOSPC;
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return 0;
}

// Where each matrix starts in the data region, and the region's size.
struct Layout {
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
};

Layout layout_of(std::span<WeightMatrix* const> matrices) {
  Layout l;
  for (const WeightMatrix* w : matrices) {
    if (!packable(*w))
      fail("packed cache: the matrix [{}, {}] ({}-bit groups of {}) has no packed layout", w->rows, w->cols, w->bits,
           w->group_size);
    l.offsets.push_back(l.total);
    l.total += round_up(static_cast<uint64_t>(packed_bytes(*w)), kMatrixAlign);
  }
  return l;
}

// Maps the cache file when its header, key and size are exactly the expected ones.
bool map_matching_file(const std::string& path, const std::string& key, uint64_t data_bytes,
                       PackedFileMapping& mapping) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const std::optional<PackedFileHeader> h = read_packed_file_header(fd);
  const bool same = h && h->version == kPackedLayoutVersion && h->key == key &&
                    h->data_offset == packed_data_offset(key) && h->data_bytes == data_bytes;
  const bool mapped = same && mapping.map(fd, h->data_offset, data_bytes);
  ::close(fd);
  return mapped;
}

// Removes temporary files of `final_name` left in `dir` by processes that no longer run.
void remove_stale_temps(const fs::path& dir, const std::string& final_name) {
  const std::string prefix = final_name + ".tmp.";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove(it->path(), rm);
    }
  }
}

// Writes header + data to a process-unique temporary file and renames it over `path`.
// Returns an empty string or what went wrong.
std::string write_cache_file(const std::string& path, const std::string& key, const uint8_t* data,
                             uint64_t data_bytes) {
  const fs::path final_path(path);
  const fs::path dir = final_path.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fmt::format("cannot create {}: {}", dir.string(), ec.message());
  const uint64_t data_offset = packed_data_offset(key);
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) == 0) {
    const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    const uint64_t need = data_offset + data_bytes + kFreeSpaceMargin;
    if (avail < need)
      return fmt::format("{} has {} MiB free, the cache needs {} MiB (+ {} MiB kept free)", dir.string(), avail >> 20,
                         (data_offset + data_bytes) >> 20, kFreeSpaceMargin >> 20);
  }
  remove_stale_temps(dir, final_path.filename().string());

  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fmt::format("cannot create {}: {}", tmp, std::strerror(errno));
  const std::vector<uint8_t> header = packed_file_header(key, data_bytes);
  int err = pwrite_all(fd, header.data(), header.size(), 0);
  if (err == 0) err = pwrite_all(fd, data, data_bytes, data_offset);  // the gap before it stays a hole
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return fmt::format("cannot write {}: {}", path, std::strerror(err));
  }
  return {};
}

void warn_stderr(const std::string& line) {
  std::fprintf(stderr, "specula: warning: %s\n", line.c_str());
  std::fflush(stderr);
}

// The tensor holding each byte range of a store, for naming a matrix's sources in the key.
class TensorLocator {
 public:
  explicit TensorLocator(const TensorStore& store) {
    for (const std::string& name : store.names()) {
      const TensorView* t = store.find(name);
      if (t != nullptr && t->data != nullptr && t->nbytes > 0) tensors_.push_back(t);
    }
    std::sort(tensors_.begin(), tensors_.end(),
              [](const TensorView* a, const TensorView* b) { return a->data < b->data; });
  }

  // "name+offset" of the tensor holding p, or "" when none does.
  std::string describe(const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    auto it = std::upper_bound(tensors_.begin(), tensors_.end(), b,
                               [](const std::byte* x, const TensorView* t) { return x < t->data; });
    if (it == tensors_.begin()) return {};
    const TensorView* t = *(it - 1);
    const auto off = static_cast<size_t>(b - t->data);
    if (off >= t->nbytes) return {};
    return fmt::format("{}+{}", t->name, off);
  }

 private:
  std::vector<const TensorView*> tensors_;
};

}  // namespace

const char* packed_source_name(PackedSource source) {
  switch (source) {
    case PackedSource::None: return "none";
    case PackedSource::Packed: return "packed";
    case PackedSource::CacheHit: return "cache hit";
    case PackedSource::CacheWritten: return "cache written";
  }
  return "?";
}

PackedFileMapping::~PackedFileMapping() { unmap(); }

PackedFileMapping::PackedFileMapping(PackedFileMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PackedFileMapping& PackedFileMapping::operator=(PackedFileMapping&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void PackedFileMapping::unmap() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

bool PackedFileMapping::map(int fd, uint64_t offset, uint64_t bytes) {
  unmap();
  if (bytes == 0 || offset % kHugePage != 0) return false;
  // Reserve an extra huge page of address space so the mapping can start on a 2 MiB boundary (the
  // file offset is one too): where the kernel backs file pages with huge pages, it can map them.
  const auto len = static_cast<size_t>(bytes);
  const size_t reserve = len + kHugePage;
  void* r = ::mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return false;
  const auto base = reinterpret_cast<uintptr_t>(r);
  const uintptr_t aligned = round_up(base, kHugePage);
  void* p =
      ::mmap(reinterpret_cast<void*>(aligned), len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    ::munmap(r, reserve);
    return false;
  }
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t end = aligned + round_up(len, page);
  if (aligned > base) ::munmap(r, aligned - base);
  if (base + reserve > end) ::munmap(reinterpret_cast<void*>(end), base + reserve - end);
  ::madvise(p, len, MADV_HUGEPAGE);  // a hint; may fail
  // Every forward reads all of it: mapped in here (~25 ms for a 4-bit E4B from the page cache),
  // the first forward's kernels do not fault it in page by page (~60 ms more).
  populate_mapped_range(p, len);
  data_ = static_cast<uint8_t*>(p);
  size_ = len;
  return true;
}

std::string packed_cache_key(const TensorStore& store, std::span<WeightMatrix* const> matrices) {
  const std::string dir = absolute_path(store.dir());
  std::string key = fmt::format("specula packed weights, layout {}\ndir {}\n", kPackedLayoutVersion, dir);
  const std::string files = packed_cache_file_lines(dir);
  if (files.empty()) return {};
  key += files;

  const TensorLocator locate(store);
  const Layout layout = layout_of(matrices);
  for (size_t i = 0; i < matrices.size(); ++i) {
    const WeightMatrix& w = *matrices[i];
    const std::string data = locate.describe(w.data);
    const std::string scales = locate.describe(w.scales);
    const std::string biases = locate.describe(w.biases);
    if (data.empty() || scales.empty() || biases.empty()) return {};
    key += fmt::format(
        "matrix {} {} {} {} rows {} cols {} bits {} packed bits {} group {} superblock {} scale {} bytes {} "
        "offset {}\n",
        i, data, scales, biases, w.rows, w.cols, w.bits, packed_code_bits(w), w.group_size, w.superblock,
        dtype_name(w.scale_dtype), packed_bytes(w), layout.offsets[i]);
  }
  key += fmt::format("data {}\n", layout.total);
  return key;
}

PackedWeights load_packed_weights(const TensorStore& store, std::span<WeightMatrix* const> matrices,
                                  const PackedCacheOptions& options, ThreadPool& pool,
                                  const std::function<void(const WeightMatrix&)>& after_pack) {
  PackedWeights out;
  if (matrices.empty()) return out;
  const Layout layout = layout_of(matrices);
  const auto warn = options.warn ? options.warn : std::function<void(const std::string&)>(warn_stderr);

  std::string key;
  if (!options.dir.empty() && layout.total >= options.min_bytes) {
    key = packed_cache_key(store, matrices);
    if (!key.empty()) out.cache_file = packed_cache_file(options.dir, store.dir());
  }
  if (!key.empty() && map_matching_file(out.cache_file, key, layout.total, out.mapping)) {
    for (size_t i = 0; i < matrices.size(); ++i) {
      // The layout fits the mapped size (checked against the file); guard the arithmetic anyway.
      if (layout.offsets[i] + static_cast<uint64_t>(packed_bytes(*matrices[i])) > out.mapping.size())
        fail("packed cache {}: matrix {} ends past the mapped {} bytes", out.cache_file, i, out.mapping.size());
      matrices[i]->packed = out.mapping.data() + layout.offsets[i];
      matrices[i]->packed_bits = packed_code_bits(*matrices[i]);
    }
    out.source = PackedSource::CacheHit;
    return out;
  }

  out.buffer = pack_matrices(matrices, pool, after_pack);
  out.source = PackedSource::Packed;
  if (key.empty()) return out;
  for (size_t i = 0; i < matrices.size(); ++i) {
    if (matrices[i]->packed != out.buffer.data() + layout.offsets[i]) {
      warn(fmt::format("not writing {}: pack_matrices() placed matrix {} elsewhere than the cache layout",
                       out.cache_file, i));
      return out;
    }
  }
  const std::string error = write_cache_file(out.cache_file, key, out.buffer.data(), layout.total);
  if (!error.empty()) {
    warn(fmt::format("packed-weight cache not saved ({}); loading goes on without it", error));
    return out;
  }
  out.source = PackedSource::CacheWritten;
  return out;
}

std::string default_packed_cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  const std::string choice = env("SPECULA_PACKED_CACHE");
  if (choice == "off") return {};
  if (!choice.empty()) return choice;
  if (const std::string d = env("SPECULA_CACHE_DIR"); !d.empty()) return (fs::path(d) / "packed").string();
  if (const std::string d = env("XDG_CACHE_HOME"); !d.empty()) return (fs::path(d) / "specula" / "packed").string();
  if (const std::string d = env("HOME"); !d.empty()) return (fs::path(d) / ".cache" / "specula" / "packed").string();
  return {};
}

}  // namespace specula
