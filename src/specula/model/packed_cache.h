#pragma once
// A file cache of the fast kernels' packed weight layout (kernels/packed_affine.h). Packing a
// multi-GB model costs seconds, almost all of it page faults of fresh memory; a later load maps the
// packed bytes from the file instead (a 4-bit E4B then loads in under a second).
//
// One file per checkpoint directory: <cache dir>/<hash of its absolute path>.specula-packed
//   (model/packed_cache_file.h): fixed header, the identity key text, zeros up to the data offset
//   (a multiple of 2 MiB), then the packed matrices in order, each at a 64-byte-aligned offset —
//   the layout pack_matrices() builds in memory.
// The identity key names everything the packed bytes depend on: the directory; each weight file's
// name, size, mtime and inode; config.json's; kPackedLayoutVersion; and every packed matrix's
// source tensors (name + byte offset), shape, bits, packed code width, group size, scale dtype,
// byte size and offset.
// A file whose header or key does not match exactly, or whose size is not the one they imply, is a
// miss: the matrices are packed again and the file replaced. Files are written under a
// process-unique temporary name and renamed over the final one, so a concurrent load sees either
// the old file or the whole new one.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "specula/io/safetensors.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/weight_matrix.h"
#include "specula/model/packed_cache_file.h"
#include "specula/util/thread_pool.h"

namespace specula {

enum class PackedSource {
  None,          // nothing packed: exact precision, or no matrix the fast kernels take
  Packed,        // packed in memory, no cache file involved (disabled, too small, or not writable)
  CacheHit,      // mapped read-only from a matching cache file
  CacheWritten,  // packed in memory, and written to the cache file for the next load
};
const char* packed_source_name(PackedSource source);  // "none", "packed", "cache hit", "cache written"

// A read-only mapping of a cache file's data region, 2 MiB-aligned in memory like the file offset.
class PackedFileMapping {
 public:
  PackedFileMapping() = default;
  ~PackedFileMapping();
  PackedFileMapping(PackedFileMapping&& other) noexcept;
  PackedFileMapping& operator=(PackedFileMapping&& other) noexcept;
  PackedFileMapping(const PackedFileMapping&) = delete;
  PackedFileMapping& operator=(const PackedFileMapping&) = delete;

  // Maps [offset, offset + bytes) of fd (offset a multiple of 2 MiB). Returns false (and maps
  // nothing) when the kernel refuses.
  bool map(int fd, uint64_t offset, uint64_t bytes);
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void unmap();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// The packed matrices of a model, wherever they live.
struct PackedWeights {
  PackedSource source = PackedSource::None;
  PackedBuffer buffer;        // Packed, CacheWritten
  PackedFileMapping mapping;  // CacheHit
  std::string cache_file;     // the file looked up (empty when no cache was used)
};

struct PackedCacheOptions {
  std::string dir;                   // empty: no cache file
  uint64_t min_bytes = 64ull << 20;  // packed weights smaller than this are neither read nor written
  // One line per problem with the cache file (never fatal); default: "specula: warning: ..." on stderr.
  std::function<void(const std::string&)> warn;
};

// Points each matrix's `packed` at its fast layout: mapped from the cache file when one matches,
// else packed in memory over the pool's threads (and then written to the cache when enabled and
// large enough). Every matrix must be packable(). `after_pack` runs once per matrix packed in
// memory — e.g. to let go of its checkpoint pages — and never on a cache hit, whose checkpoint
// pages were not touched. A missing, stale, truncated or garbage cache file is a miss; a failed
// write is one warning; neither throws. Throws only what packing in memory throws.
PackedWeights load_packed_weights(const TensorStore& store, std::span<WeightMatrix* const> matrices,
                                  const PackedCacheOptions& options, ThreadPool& pool,
                                  const std::function<void(const WeightMatrix&)>& after_pack = {});

// The identity key of the packed layout of `matrices` from `store` (see the top of this file), or
// an empty string when a matrix's bytes cannot be traced to a tensor of the store (then nothing is
// cached).
std::string packed_cache_key(const TensorStore& store, std::span<WeightMatrix* const> matrices);

// The CLI's cache directory: SPECULA_PACKED_CACHE=off -> "" (disabled); SPECULA_PACKED_CACHE=DIR
// -> DIR; else $SPECULA_CACHE_DIR/packed, $XDG_CACHE_HOME/specula/packed or
// $HOME/.cache/specula/packed; "" when none of them is set.
std::string default_packed_cache_dir();

}  // namespace specula
