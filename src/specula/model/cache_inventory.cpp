#include "specula/model/cache_inventory.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "specula/model/gguf_image_cache.h"
#include "specula/model/packed_cache_file.h"
#include "specula/util/error.h"

namespace specula {

namespace {

namespace fs = std::filesystem;

uint64_t disk_bytes(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return static_cast<uint64_t>(st.st_blocks) * 512;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
    if (::lstat(it->path().c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      total += static_cast<uint64_t>(st.st_blocks) * 512;
  return total;
}

// The writer's process id of a temporary file name ("<final>.tmp.PID.N" from the packed cache,
// "<final>.tmp-PID" from the GGUF image cache), or nullopt when the name is not one.
std::optional<long> temporary_pid(const std::string& name) {
  for (const char* marker : {".tmp.", ".tmp-"}) {
    const size_t at = name.rfind(marker);
    if (at == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + at + 5, &end, 10);
    if (pid > 0 && end != name.c_str() + at + 5 && (*end == '\0' || *end == '.')) return pid;
  }
  return std::nullopt;
}

bool process_runs(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH; }

CacheEntry temporary(const fs::path& p, long pid) {
  CacheEntry e;
  e.kind = CacheEntryKind::Temporary;
  e.state = process_runs(pid) ? CacheEntryState::InUse : CacheEntryState::Leftover;
  e.path = p.string();
  e.bytes = disk_bytes(p);
  return e;
}

// The text of a key line "<prefix>REST\n": REST, or nullopt.
std::optional<std::string> key_line(const std::string& key, const std::string& prefix) {
  for (size_t at = 0; at < key.size();) {
    const size_t end = std::min(key.find('\n', at), key.size());
    if (key.compare(at, prefix.size(), prefix) == 0) return key.substr(at + prefix.size(), end - at - prefix.size());
    at = end + 1;
  }
  return std::nullopt;
}

CacheEntry packed_entry(const fs::path& file) {
  CacheEntry e;
  e.kind = CacheEntryKind::PackedWeights;
  e.path = file.string();
  e.bytes = disk_bytes(file);
  const std::optional<PackedFileHeader> header = read_packed_file_header(e.path);
  const std::optional<std::string> dir = header ? key_line(header->key, "dir ") : std::nullopt;
  if (!dir) {
    e.state = CacheEntryState::Unreadable;
    return e;
  }
  e.source = *dir;
  std::error_code ec;
  if (!fs::is_directory(e.source, ec)) {
    e.state = CacheEntryState::SourceMissing;
    return e;
  }
  // The key: the layout line, the dir line, the file lines, then the matrices.
  const std::string& key = header->key;
  const std::string head = fmt::format("specula packed weights, layout {}\ndir {}\n", kPackedLayoutVersion, e.source);
  const std::string files = packed_cache_file_lines(e.source);
  // (A load of the directory looks for the file named after its path: another name is never used.)
  const bool named = fs::path(packed_cache_file(file.parent_path().string(), e.source)).filename() == file.filename();
  const bool same = named && header->version == kPackedLayoutVersion && !files.empty() &&
                    key.compare(0, head.size(), head) == 0 && key.compare(head.size(), files.size(), files) == 0 &&
                    key.compare(head.size() + files.size(), 7, "matrix ") == 0;
  e.state = same ? CacheEntryState::Current : CacheEntryState::Stale;
  return e;
}

CacheEntry gguf_entry(const fs::path& cache_dir, const fs::path& dir) {
  CacheEntry e;
  e.kind = CacheEntryKind::GgufImage;
  e.path = dir.string();
  e.bytes = disk_bytes(dir);
  e.state = CacheEntryState::Unreadable;
  std::ifstream in(dir / "image.json", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json key = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  const auto identity = key.is_object() ? key.find("key") : key.end();
  if (!key.is_object() || identity == key.end() || !identity->is_string()) return e;
  // "file PATH size N mtime_ns ..." (the path may hold spaces: it ends at the last " size ").
  const std::optional<std::string> line = key_line(identity->get<std::string>(), "file ");
  const size_t size_at = line ? line->rfind(" size ") : std::string::npos;
  if (size_at == std::string::npos) return e;
  e.source = line->substr(0, size_at);
  std::error_code ec;
  if (!fs::is_regular_file(e.source, ec)) {
    e.state = CacheEntryState::SourceMissing;
    return e;
  }
  try {
    const GgufImageEntry now = gguf_image_entry(cache_dir.string(), e.source);
    const bool same = fs::equivalent(now.dir, dir, ec) && find_gguf_image(now).has_value();
    e.state = same ? CacheEntryState::Current : CacheEntryState::Stale;
  } catch (const Error&) {
    e.state = CacheEntryState::SourceMissing;
  }
  return e;
}

void list_gguf_images(const fs::path& dir, std::vector<CacheEntry>& out) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->path().filename().string().size() != 16) continue;
    std::vector<CacheEntry> temporaries;
    std::error_code inner;
    for (fs::directory_iterator f(it->path(), inner), fend; !inner && f != fend; f.increment(inner))
      if (const auto pid = temporary_pid(f->path().filename().string()))
        temporaries.push_back(temporary(f->path(), *pid));
    CacheEntry entry = gguf_entry(dir, it->path());
    const bool writing = std::any_of(temporaries.begin(), temporaries.end(),
                                     [](const CacheEntry& t) { return t.state == CacheEntryState::InUse; });
    if (writing) entry.state = CacheEntryState::InUse;  // a running load is converting into it
    out.push_back(entry);
    // Leftovers inside a folder that stays are entries of their own.
    if (entry.state == CacheEntryState::Current)
      for (const CacheEntry& t : temporaries) out.push_back(t);
  }
}

}  // namespace

const char* cache_entry_kind_name(CacheEntryKind kind) {
  switch (kind) {
    case CacheEntryKind::PackedWeights: return "packed weights";
    case CacheEntryKind::GgufImage: return "GGUF image";
    case CacheEntryKind::Temporary: return "temporary";
  }
  return "?";
}

const char* cache_entry_state_name(CacheEntryState state) {
  switch (state) {
    case CacheEntryState::Current: return "current";
    case CacheEntryState::Stale: return "stale";
    case CacheEntryState::SourceMissing: return "source missing";
    case CacheEntryState::Unreadable: return "unreadable";
    case CacheEntryState::Leftover: return "leftover";
    case CacheEntryState::InUse: return "in use";
  }
  return "?";
}

bool cache_entry_prunable(CacheEntryState state) {
  return state != CacheEntryState::Current && state != CacheEntryState::InUse;
}

std::vector<CacheEntry> list_cache(const std::string& packed_cache_dir) {
  std::vector<CacheEntry> out;
  if (packed_cache_dir.empty()) return out;
  const fs::path dir(packed_cache_dir);
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file(ec)) continue;
    if (name.ends_with(kPackedCacheSuffix)) {
      out.push_back(packed_entry(it->path()));
    } else if (const auto pid = temporary_pid(name); pid && name.find(kPackedCacheSuffix) != std::string::npos) {
      out.push_back(temporary(it->path(), *pid));
    }
  }
  list_gguf_images(gguf_image_cache_dir(packed_cache_dir), out);
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) { return a.path < b.path; });
  return out;
}

std::vector<CacheEntry> prune_cache(const std::string& packed_cache_dir, bool prune_all) {
  std::vector<CacheEntry> removed;
  for (const CacheEntry& e : list_cache(packed_cache_dir)) {
    if (e.state == CacheEntryState::InUse || (!prune_all && !cache_entry_prunable(e.state))) continue;
    std::error_code ec;
    fs::remove_all(e.path, ec);
    if (ec) fail("cannot remove {}: {}", e.path, ec.message());
    removed.push_back(e);
  }
  return removed;
}

}  // namespace specula
