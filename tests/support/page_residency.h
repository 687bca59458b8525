#pragma once
// Whether a page is mapped in this process, for tests of when memory gets touched.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace specula {

// Whether the page holding `p` is mapped in this process (bit 63 of its /proc/self/pagemap entry).
inline bool page_present(const void* p) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open /proc/self/pagemap");
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uint64_t entry = 0;
  const auto offset = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / page * sizeof(entry));
  const ssize_t got = ::pread(fd, &entry, sizeof(entry), offset);
  ::close(fd);
  if (got != static_cast<ssize_t>(sizeof(entry))) throw std::runtime_error("cannot read /proc/self/pagemap");
  return (entry >> 63) != 0;
}

}  // namespace specula
