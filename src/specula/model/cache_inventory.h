#pragma once
// What the on-disk caches hold, and removing what no load will use again (`specula cache`).
// The packed-weight cache (model/packed_cache.h) keeps one file per checkpoint directory and the
// GGUF image cache (model/gguf_image_cache.h) one folder per GGUF file; neither ever deletes an
// entry whose checkpoint changed or went away, nor the temporaries of an interrupted write. This
// module lists every entry with the checkpoint it was made from and whether a load of that
// checkpoint would still use it, and prunes the ones that would not.
#include <cstdint>
#include <string>
#include <vector>

namespace specula {

enum class CacheEntryKind { PackedWeights, GgufImage, Temporary };
const char* cache_entry_kind_name(CacheEntryKind kind);  // "packed weights", "GGUF image", "temporary"

enum class CacheEntryState {
  Current,        // a load of its checkpoint uses it as it is
  Stale,          // its checkpoint changed (or another layout version): the next load rewrites it
  SourceMissing,  // its checkpoint is gone
  Unreadable,     // not an entry specula can read (damaged, foreign)
  Leftover,       // a temporary file of a process that no longer runs
  InUse,          // a temporary file of a running process, or a GGUF folder one is writing into
};
const char* cache_entry_state_name(CacheEntryState state);

struct CacheEntry {
  CacheEntryKind kind = CacheEntryKind::PackedWeights;
  CacheEntryState state = CacheEntryState::Current;
  std::string path;    // the cache file, the GGUF image's folder, or the temporary file
  std::string source;  // the checkpoint directory or GGUF file it was made from ("" when unknown)
  uint64_t bytes = 0;  // disk space it takes (allocated blocks: the files have holes)
};

// Whether `prune` removes an entry in this state (all but Current and InUse).
bool cache_entry_prunable(CacheEntryState state);

// The entries of a packed-weight cache directory and of its gguf/ folder, sorted by path. A
// missing directory has none; files that are not cache entries are left out (and never removed).
std::vector<CacheEntry> list_cache(const std::string& packed_cache_dir);

// Removes the entries prune_all ? (all but InUse) : cache_entry_prunable; returns the ones removed.
// Throws specula::Error naming the path when one cannot be removed.
std::vector<CacheEntry> prune_cache(const std::string& packed_cache_dir, bool prune_all);

}  // namespace specula
