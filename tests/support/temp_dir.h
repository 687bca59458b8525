#pragma once
// A directory under the system temp dir, removed with everything in it when the object dies.
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace specula::test {

class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& stem = "specula-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace specula::test
