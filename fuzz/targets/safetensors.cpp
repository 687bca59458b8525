// Fuzz entry: SafetensorsFile::open on an arbitrary file. The API reads a path, so the input is
// written to a per-process temp file first.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_entries.h"
#include "specula/io/dtype.h"
#include "specula/io/safetensors.h"
#include "specula/util/error.h"

namespace specula::fuzz {
namespace {

std::string temp_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("specula-fuzz-" + std::to_string(getpid()) + ".safetensors")).string();
  return path;
}

// The mutator rarely gets an 8-byte length right, so the even mode computes it from the header.
std::string file_bytes(const uint8_t* data, size_t size) {
  if (size == 0) return {};
  const char* rest = reinterpret_cast<const char*>(data + 1);
  const size_t n = size - 1;
  if (data[0] & 1) return std::string(rest, n);
  std::string_view body(rest, n);
  const size_t split = body.find('\0');
  const std::string_view header = body.substr(0, split);
  const std::string_view tensor_data = split == std::string_view::npos ? std::string_view{} : body.substr(split + 1);
  std::string out(8, '\0');
  uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  out.append(header);
  out.append(tensor_data);
  return out;
}

}  // namespace

int fuzz_safetensors(const uint8_t* data, size_t size) {
  const std::string path = temp_path();
  {
    const std::string bytes = file_bytes(data, size);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    const SafetensorsFile file = SafetensorsFile::open(path);
    // Every view must lie inside the mapping: touching its first and last byte lets ASan check it.
    unsigned sum = 0;
    for (const TensorView& t : file.tensors()) {
      if (file.find(t.name) != &t) std::abort();
      if (t.numel() < 0) std::abort();
      if (t.nbytes != static_cast<size_t>(t.numel()) * dtype_size(t.dtype)) std::abort();
      if (t.nbytes > 0) sum += static_cast<unsigned>(t.data[0]) + static_cast<unsigned>(t.data[t.nbytes - 1]);
      (void)t.shape_str();
    }
    if (sum == 0xdeadbeef) std::puts("");  // keeps the reads
  } catch (const specula::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}

}  // namespace specula::fuzz
