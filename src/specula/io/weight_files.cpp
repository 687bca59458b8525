#include "specula/io/weight_files.h"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <system_error>

namespace specula {

namespace fs = std::filesystem;

bool is_model_shard_name(const std::string& name) {
  if (name == "model.safetensors") return true;
  const std::string head = "model-", mid = "-of-", tail = ".safetensors";
  if (name.size() < head.size() + mid.size() + tail.size() + 2 || name.rfind(head, 0) != 0 ||
      name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    return false;
  const std::string core = name.substr(head.size(), name.size() - head.size() - tail.size());
  const size_t of = core.find(mid);
  if (of == std::string::npos || of == 0 || of + mid.size() >= core.size()) return false;
  const auto digits = [](std::string_view v) {
    return std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return digits(std::string_view(core).substr(0, of)) && digits(std::string_view(core).substr(of + mid.size()));
}

bool is_weight_file_path(const std::string& path) {
  std::error_code ec;
  return fs::path(path).extension() == ".safetensors" && fs::is_regular_file(path, ec);
}

std::string model_files_dir(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return path;
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? std::string(".") : parent;
}

TensorStore open_weights(const std::string& path) {
  if (is_weight_file_path(path)) return TensorStore::open_files({path});
  return TensorStore::open_dir(path);
}

}  // namespace specula
