#pragma once
// An output file written under FINAL.tmp and renamed over FINAL by commit(), so that an interrupted
// or failed write never leaves a truncated file under the final name (the temporary is removed).
#include <cstddef>
#include <string>

namespace specula {

class TempFile {
 public:
  explicit TempFile(std::string final_path);  // throws specula::Error naming the path
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* p, size_t n);
  // fsync, close, rename over the final path.
  void commit();

 private:
  std::string final_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace specula
