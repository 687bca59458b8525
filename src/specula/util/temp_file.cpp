#include "specula/util/temp_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "specula/util/error.h"

namespace specula {

TempFile::TempFile(std::string final_path) : final_(std::move(final_path)), tmp_(final_ + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create {}: {}", tmp_, std::strerror(errno));
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void TempFile::write(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd_, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write {}: {}", tmp_, std::strerror(errno));
    }
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void TempFile::commit() {
  if (::fsync(fd_) != 0) fail("cannot sync {}: {}", tmp_, std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("cannot close {}: {}", tmp_, std::strerror(errno));
  if (std::rename(tmp_.c_str(), final_.c_str()) != 0)
    fail("cannot rename {} to {}: {}", tmp_, final_, std::strerror(errno));
  committed_ = true;
}

}  // namespace specula
