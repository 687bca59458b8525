#include "specula/util/huge_page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "specula/util/alignment.h"
#include "specula/util/error.h"

namespace specula {

HugePageBuffer::HugePageBuffer(size_t bytes, std::string_view what) {
  if (bytes == 0) return;
  if (bytes > SIZE_MAX / 2) fail("cannot allocate {} bytes for {}", bytes, what);
  // Mapped with a huge page to spare, then trimmed to the whole huge pages that start on a
  // boundary: one mapping (one kernel VMA) per buffer, however many buffers a long context needs.
  const size_t span = round_up(bytes, kHugePage);
  const size_t reserve = span + kHugePage;
  void* p = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    // ENOMEM also when the process has as many mappings as vm.max_map_count allows (65530 by
    // default: ~128 GB of 2 MiB KV cache blocks).
    fail("cannot allocate {} MiB for {}: {} (out of memory, or past the kernel's vm.max_map_count)",
         (bytes + (1u << 20) - 1) >> 20, what, std::strerror(errno));
  }
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = round_up(base, kHugePage);
  if (start > base) munmap(p, start - base);
  if (base + reserve > start + span) munmap(reinterpret_cast<void*>(start + span), base + reserve - (start + span));
  data_ = reinterpret_cast<uint8_t*>(start);
  size_ = bytes;
  mapped_ = span;
  madvise(data_, span, MADV_HUGEPAGE);  // a hint; may fail
}

HugePageBuffer::~HugePageBuffer() { release(); }

void HugePageBuffer::release() {
  if (mapped_ != 0) munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

}  // namespace specula
