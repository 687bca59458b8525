#pragma once
// A read-only memory mapping of a whole file. Weights are used in place from it (zero copy).
#include <cstddef>
#include <string>

namespace specula {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws specula::Error naming the path on failure. Empty files map to size 0, data nullptr.
  static MappedFile open(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Whether [p, p+n) lies inside the mapping.
  bool contains(const void* p, size_t n) const;
  // Drops the resident pages wholly inside [p, p+n) from this process (they are read back from
  // the page cache if touched again), e.g. after their contents were copied elsewhere.
  // Does nothing for a range outside the mapping.
  void release(const void* p, size_t n) const;
  // Maps the pages of [p, p+n) into this process now (reading them from the file if the page cache
  // lacks them), so later first touches do not fault one region at a time. Does nothing for a
  // range outside the mapping.
  void populate(const void* p, size_t n) const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Maps the pages of [p, p+n), which must lie inside one readable mapping, into this process now:
// MADV_POPULATE_READ, or one read per page on kernels before 5.14.
void populate_mapped_range(const void* p, size_t n);

}  // namespace specula
