#pragma once
// safetensors reading (zero-copy over mmap) and writing.
//
// File layout: u64 little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data region; offsets are relative to the start of the data region.
// Everything is validated at open (see SafetensorsFile::open) so later code can trust the views.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "specula/io/dtype.h"
#include "specula/util/mapped_file.h"

namespace specula {

// One tensor inside a mapped file. `data` points into the mapping (valid while the file lives).
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t nbytes = 0;
  const std::string* file = nullptr;  // path of the file that holds it (for error messages)

  int64_t numel() const;
  int64_t dim(size_t i) const { return shape.at(i); }
  std::string shape_str() const;  // "[262144, 320]"
};

// Largest header accepted (the biggest real headers are a few hundred KB).
inline constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

class SafetensorsFile {
 public:
  // Maps and validates the file: header length vs file size and kMaxSafetensorsHeader, JSON
  // well-formed, known dtypes, shapes non-negative and their byte size free of overflow, every
  // data_offsets pair inside the data region and equal to prod(shape) * dtype_size, no two
  // tensors overlapping. Throws specula::Error naming the file (and tensor, when one is at fault).
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return *path_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;  // nullptr if absent
  size_t file_size() const { return file_.size(); }
  const MappedFile& mapping() const { return file_; }

 private:
  MappedFile file_;
  std::unique_ptr<std::string> path_;  // stable address for TensorView::file
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> index_;
};

// All tensors of a checkpoint directory: `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` ("weight_map": name -> shard file), or (if neither exists) every
// `*.safetensors` file in the directory. A tensor name found in two files is an error.
class TensorStore {
 public:
  static TensorStore open_dir(const std::string& dir);
  static TensorStore open_files(const std::vector<std::string>& paths);
  // A store of tensor descriptions without data (data == nullptr), for validating a tensor
  // inventory (e.g. a full-size synthetic plan) without writing it. Views are copied.
  static TensorStore from_views(const std::string& dir, std::vector<TensorView> views);

  const TensorView* find(const std::string& name) const;  // nullptr if absent
  const TensorView& get(const std::string& name) const;   // throws naming the tensor and dir
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  // Tensor names in sorted order.
  std::vector<std::string> names() const;
  const std::string& dir() const { return dir_; }
  uint64_t total_bytes() const;  // sum of file sizes
  size_t size() const { return index_.size(); }
  // Drops this process's resident pages of [p, p+n) if the range lies in one of the store's
  // files (MappedFile::release); a no-op otherwise.
  void release_pages(const void* p, size_t n) const;
  // Maps the pages of [p, p+n) in now (MappedFile::populate) if the range lies in one of the
  // store's files; a no-op otherwise.
  void populate_pages(const void* p, size_t n) const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::unique_ptr<TensorView>> owned_views_;  // from_views only
  std::unique_ptr<std::string> views_dir_;                // from_views only: stable TensorView::file
  std::map<std::string, const TensorView*> index_;
};

// Writes a safetensors file tensor by tensor, so a multi-GB checkpoint never sits in RAM.
// The header is computed from the declared tensors first (padded with spaces to 8 bytes, as the
// reference writer does), then each tensor's bytes are produced by its fill callback in chunks of
// whole leading-dimension rows.
struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  // Fill rows [row_begin, row_end) of dim 0 into `out` (exactly (row_end-row_begin)*row_bytes).
  // A 0-d tensor has one "row".
  std::function<void(int64_t row_begin, int64_t row_end, std::span<std::byte> out)> fill;
};

struct WriteOptions {
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  size_t chunk_bytes = 64u << 20;                               // rows per fill call are sized to this
  std::function<void(uint64_t done, uint64_t total)> progress;  // tensor data bytes written so far
};

// Writes atomically (to path + ".tmp", then rename). Throws specula::Error on I/O failure.
void write_safetensors(const std::string& path, const std::vector<TensorSpec>& tensors,
                       const WriteOptions& options = {});

// Convenience for small tensors held in memory.
TensorSpec tensor_from_bytes(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<std::byte> bytes);

}  // namespace specula
