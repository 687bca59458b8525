#pragma once
// Anonymous memory that starts on a huge-page boundary and asks the kernel for transparent huge
// pages (MADV_HUGEPAGE: a hint, honoured where THP is "always" or "madvise"). What a step streams
// whole from memory lives here: the packed weights, and the blocks of the full-attention layers'
// KV caches. With 4 KiB pages a 32k-context decode step misses the TLB on every page of the ~1 GB
// of K and V it reads, and the page walks go to DRAM once the weight stream has evicted the page
// tables (docs/performance.md).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specula {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // `bytes` of zeroed memory (none for 0); the mapping covers them rounded up to whole huge pages.
  // Throws specula::Error naming `what` when the memory is not there.
  HugePageBuffer(size_t bytes, std::string_view what);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();

  uint8_t* data_ = nullptr;  // the mapping's start, on a huge-page boundary
  size_t size_ = 0;
  size_t mapped_ = 0;  // size_ rounded up to whole huge pages
};

}  // namespace specula
