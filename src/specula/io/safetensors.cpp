#include "specula/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "specula/io/byte_ranges.h"
#include "specula/io/weight_files.h"
#include "specula/util/error.h"
#include "specula/util/printable.h"
#include "specula/util/temp_file.h"

namespace specula {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// prod(shape) * dtype_size without overflow; nullopt when it does not fit in 63 bits.
std::optional<uint64_t> checked_nbytes(const std::vector<int64_t>& shape, DType dtype) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  }
  // numel() and shape arithmetic elsewhere are int64_t.
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return n;
}

// "an array", "a number", ... for messages.
std::string json_type(const json& j) {
  const std::string t = j.type_name();
  if (t == "null") return t;
  return (t == "array" || t == "object" ? "an " : "a ") + t;
}

// Reads one non-negative JSON integer that must fit in int64_t. `what` names it for messages.
template <typename Fail>
int64_t non_negative_int(const json& j, const Fail& fail_with, const std::string& what) {
  if (!j.is_number_integer()) fail_with(fmt::format("{} is {}, not an integer", what, json_type(j)));
  if (!j.is_number_unsigned()) fail_with(fmt::format("{} = {} is negative", what, j.get<int64_t>()));
  const uint64_t v = j.get<uint64_t>();
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail_with(fmt::format("{} = {} is too large", what, v));
  return static_cast<int64_t>(v);
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_str() const { return dims_string(shape); }

// ---------------------------------------------------------------------------------------------
// SafetensorsFile

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = std::make_unique<std::string>(path);
  f.file_ = MappedFile::open(path);
  const std::byte* base = f.file_.data();
  const uint64_t size = f.file_.size();

  if (size < 8) fail("{}: file is {} bytes, too short for the 8-byte header length", path, size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | std::to_integer<uint64_t>(base[i]);
  if (header_len == 0) fail("{}: header length is 0", path);
  if (header_len > kMaxSafetensorsHeader)
    fail("{}: header length {} exceeds the limit of {} bytes", path, header_len, kMaxSafetensorsHeader);
  if (header_len > size - 8)
    fail("{}: header length {} is longer than the file ({} bytes after the length field)", path, header_len, size - 8);

  const char* header_begin = reinterpret_cast<const char*>(base + 8);
  // Duplicate top-level keys would silently keep one description; reject them instead.
  std::set<std::string> seen_keys;
  std::string duplicate;
  const auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() && parsed.is_string()) {
      if (!seen_keys.insert(parsed.get<std::string>()).second) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(header_begin, header_begin + header_len, on_event);
  } catch (const json::exception& e) {
    fail("{}: header is not valid JSON: {}", path, printable_name(e.what()));
  }
  if (!header.is_object()) fail("{}: header is {}, not a JSON object", path, json_type(header));
  if (!duplicate.empty()) fail("{}: tensor '{}': name appears twice in the header", path, printable_name(duplicate));

  const std::byte* data = base + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<ByteRange> ranges;
  f.tensors_.reserve(header.size());
  for (const auto& item : header.items()) {
    // Named references, not structured bindings: clang < 16 cannot capture bindings in lambdas.
    const std::string& name = item.key();
    const json& entry = item.value();
    if (name == "__metadata__") continue;
    const auto bad = [&](const std::string& why) { fail("{}: tensor '{}': {}", path, printable_name(name), why); };
    if (!entry.is_object()) bad(fmt::format("entry is {}, not a JSON object", json_type(entry)));
    const auto field = [&](const char* key) -> const json& {
      const auto it = entry.find(key);
      if (it == entry.end()) bad(fmt::format("missing \"{}\"", key));
      return *it;
    };
    const json& jdtype = field("dtype");
    const json& jshape = field("shape");
    const json& joffsets = field("data_offsets");

    if (!jdtype.is_string()) bad(fmt::format("\"dtype\" is {}, not a string", json_type(jdtype)));
    const auto dtype_str = jdtype.get<std::string>();
    const auto dtype = parse_dtype(dtype_str);
    if (!dtype) bad(fmt::format("unknown dtype '{}'", printable_name(dtype_str)));

    if (!jshape.is_array()) bad(fmt::format("\"shape\" is {}, not an array", json_type(jshape)));
    std::vector<int64_t> shape;
    shape.reserve(jshape.size());
    for (size_t i = 0; i < jshape.size(); ++i)
      shape.push_back(non_negative_int(jshape[i], bad, fmt::format("dimension {} of \"shape\"", i)));

    if (!joffsets.is_array() || joffsets.size() != 2)
      bad(fmt::format("\"data_offsets\" must be an array of 2 integers, got {}",
                      printable_name(joffsets.dump(-1, ' ', false, json::error_handler_t::replace))));
    const auto begin = static_cast<uint64_t>(non_negative_int(joffsets[0], bad, "data_offsets[0]"));
    const auto end = static_cast<uint64_t>(non_negative_int(joffsets[1], bad, "data_offsets[1]"));
    if (begin > end) bad(fmt::format("data_offsets [{}, {}] begin is after end", begin, end));

    const auto nbytes = checked_nbytes(shape, *dtype);
    if (!nbytes) bad(fmt::format("shape {} of {} overflows a 64-bit byte count", dims_string(shape), dtype_str));
    if (end > data_size)
      bad(fmt::format("data_offsets [{}, {}] end past the data region ({} bytes)", begin, end, data_size));
    if (end - begin != *nbytes)
      bad(fmt::format("data_offsets [{}, {}] hold {} bytes but shape {} of {} needs {}", begin, end, end - begin,
                      dims_string(shape), dtype_str, *nbytes));

    TensorView view;
    view.name = name;
    view.dtype = *dtype;
    view.shape = std::move(shape);
    view.data = data + begin;
    view.nbytes = static_cast<size_t>(*nbytes);
    view.file = f.path_.get();
    ranges.push_back({begin, end, f.tensors_.size()});
    f.tensors_.push_back(std::move(view));
  }

  // Empty tensors take no bytes; the others must not share any.
  std::erase_if(ranges, [](const ByteRange& r) { return r.begin == r.end; });
  if (const auto overlap = first_overlap(ranges)) {
    const auto& [ra, rb] = *overlap;
    fail("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", path, printable_name(f.tensors_[ra.index].name),
         ra.begin, ra.end, printable_name(f.tensors_[rb.index].name), rb.begin, rb.end);
  }

  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.emplace(f.tensors_[i].name, i);
  return f;
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---------------------------------------------------------------------------------------------
// TensorStore

namespace {

// Adds every tensor of `file` to `index`, rejecting a name already held by another file.
void add_file_tensors(const SafetensorsFile& file, std::map<std::string, const TensorView*>& index) {
  for (const TensorView& view : file.tensors()) {
    const auto [it, inserted] = index.emplace(view.name, &view);
    if (!inserted) fail("tensor '{}' is in both {} and {}", printable_name(view.name), *it->second->file, file.path());
  }
}

json read_index_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read {}", path);
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", path, printable_name(e.what()));
  }
}

}  // namespace

TensorStore TensorStore::open_files(const std::vector<std::string>& paths) {
  if (paths.empty()) fail("no safetensors files given");
  TensorStore store;
  store.dir_ = fs::path(paths.front()).parent_path().string();
  if (store.dir_.empty()) store.dir_ = ".";
  for (const auto& p : paths) {
    store.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(p)));
    add_file_tensors(*store.files_.back(), store.index_);
  }
  return store;
}

TensorStore TensorStore::open_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("{} is not a directory", dir);
  const fs::path root(dir);

  const fs::path index_path = root / "model.safetensors.index.json";
  if (fs::exists(index_path, ec)) {
    const std::string ipath = index_path.string();
    const json index = read_index_json(ipath);
    if (!index.is_object()) fail("{}: expected a JSON object, got {}", ipath, json_type(index));
    const auto wm = index.find("weight_map");
    if (wm == index.end()) fail("{}: missing \"weight_map\"", ipath);
    if (!wm->is_object()) fail("{}: \"weight_map\" is {}, not an object", ipath, json_type(*wm));

    // shard file name -> tensor names the index places there
    std::map<std::string, std::vector<std::string>> shards;
    for (const auto& [name, shard] : wm->items()) {
      if (!shard.is_string())
        fail("{}: weight_map entry '{}' is {}, not a file name", ipath, printable_name(name), json_type(shard));
      const auto file = shard.get<std::string>();
      // Shards live in the checkpoint directory; never follow a name out of it.
      const fs::path fp(file);
      if (file.empty() || fp.is_absolute() ||
          std::any_of(fp.begin(), fp.end(), [](const fs::path& c) { return c == ".."; }))
        fail("{}: weight_map entry '{}' names shard '{}' outside the directory", ipath, printable_name(name),
             printable_name(file));
      shards[file].push_back(name);
    }
    if (shards.empty()) fail("{}: \"weight_map\" is empty", ipath);

    TensorStore store;
    store.dir_ = dir;
    for (const auto& [shard, names] : shards) {
      const std::string spath = (root / shard).string();
      if (!fs::is_regular_file(spath, ec))
        fail("{}: shard '{}' (holding tensor '{}') does not exist: {}", ipath, printable_name(shard),
             printable_name(names.front()), spath);
      store.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(spath)));
      const SafetensorsFile& file = *store.files_.back();
      for (const auto& name : names)
        if (!file.find(name))
          fail("{}: tensor '{}' is listed in shard '{}' but {} does not contain it", ipath, printable_name(name),
               printable_name(shard), spath);
      add_file_tensors(file, store.index_);
    }
    return store;
  }

  const fs::path single = root / "model.safetensors";
  if (fs::exists(single, ec)) {
    TensorStore store = open_files({single.string()});
    store.dir_ = dir;
    return store;
  }

  // Without an index only model shards are weights: sidecars such as optiq_vision.safetensors
  // hold other modules and are never opened.
  std::vector<std::string> paths, others;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().extension() != ".safetensors" || !entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    (is_model_shard_name(name) ? paths : others).push_back(name);
  }
  if (ec) fail("cannot list {}: {}", dir, ec.message());
  std::sort(others.begin(), others.end());
  if (paths.empty()) {
    std::vector<std::string> shown;
    for (const auto& o : others) shown.push_back(printable_name(o));
    fail(
        "no safetensors files in {} (looked for model.safetensors.index.json, model.safetensors and "
        "model-NNNNN-of-NNNNN.safetensors{}{})",
        dir, others.empty() ? "" : "; not model shards: ", fmt::format("{}", fmt::join(shown, ", ")));
  }
  for (std::string& p : paths) p = (root / p).string();
  std::sort(paths.begin(), paths.end());
  TensorStore store = open_files(paths);
  store.dir_ = dir;
  return store;
}

TensorStore TensorStore::from_views(const std::string& dir, std::vector<TensorView> views) {
  TensorStore store;
  store.dir_ = dir;
  store.views_dir_ = std::make_unique<std::string>(dir);
  for (auto& v : views) {
    const auto nbytes = checked_nbytes(v.shape, v.dtype);
    if (!nbytes)
      fail("{}: tensor '{}': shape {} of {} is negative or overflows a 64-bit byte count", dir, printable_name(v.name),
           dims_string(v.shape), dtype_name(v.dtype));
    auto owned = std::make_unique<TensorView>(std::move(v));
    owned->data = nullptr;
    owned->nbytes = static_cast<size_t>(*nbytes);
    owned->file = store.views_dir_.get();
    if (!store.index_.emplace(owned->name, owned.get()).second)
      fail("{}: tensor '{}' given twice", dir, printable_name(owned->name));
    store.owned_views_.push_back(std::move(owned));
  }
  return store;
}

const TensorView* TensorStore::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorView& TensorStore::get(const std::string& name) const {
  const TensorView* v = find(name);
  if (!v) fail("tensor '{}' not found in {}", printable_name(name), dir_);
  return *v;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& kv : index_) out.push_back(kv.first);
  return out;
}

uint64_t TensorStore::total_bytes() const {
  uint64_t total = 0;
  for (const auto& f : files_) total += f->file_size();
  // A store of bare views has no files: count the bytes the tensors would occupy.
  for (const auto& v : owned_views_) total += v->nbytes;
  return total;
}

void TensorStore::release_pages(const void* p, size_t n) const {
  for (const auto& f : files_) {
    if (f->mapping().contains(p, n)) return f->mapping().release(p, n);
  }
}

void TensorStore::populate_pages(const void* p, size_t n) const {
  for (const auto& f : files_) {
    if (f->mapping().contains(p, n)) return f->mapping().populate(p, n);
  }
}

// ---------------------------------------------------------------------------------------------
// Writing

namespace {

std::string json_string(const std::string& s, const std::string& path, const std::string& what) {
  try {
    return json(s).dump();
  } catch (const json::exception& e) {
    fail("{}: {} '{}' is not valid UTF-8: {}", path, what, printable_name(s), e.what());
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorSpec>& tensors, const WriteOptions& options) {
  // Header first: it fixes every offset before any data is produced.
  std::vector<uint64_t> sizes;
  sizes.reserve(tensors.size());
  std::set<std::string> names;
  std::string header = "{";
  if (!options.metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : options.metadata) {
      if (!first) header += ',';
      first = false;
      header += json_string(k, path, "metadata key") + ":" + json_string(v, path, "metadata value");
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__") fail("{}: '__metadata__' is reserved, not a tensor name", path);
    if (!names.insert(t.name).second) fail("{}: tensor '{}' declared twice", path, printable_name(t.name));
    const auto nbytes = checked_nbytes(t.shape, t.dtype);
    if (!nbytes)
      fail("{}: tensor '{}': shape {} of {} is negative or overflows a 64-bit byte count", path, printable_name(t.name),
           dims_string(t.shape), dtype_name(t.dtype));
    if (*nbytes > 0 && !t.fill) fail("{}: tensor '{}' has no fill function", path, printable_name(t.name));
    if (header.size() > 1) header += ',';
    header += json_string(t.name, path, "tensor name");
    header += fmt::format(":{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{},{}]}}", dtype_name(t.dtype),
                          json(t.shape).dump(), offset, offset + *nbytes);
    offset += *nbytes;
    sizes.push_back(*nbytes);
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxSafetensorsHeader)
    fail("{}: header of {} bytes exceeds the limit of {} bytes", path, header.size(), kMaxSafetensorsHeader);

  // Progress counts tensor data only, so callers can sum it across shards.
  const uint64_t total = offset;
  TempFile out(path);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(uint64_t{header.size()} >> (8 * i));
  out.write(len, 8);
  out.write(header.data(), header.size());
  uint64_t done = 0;

  std::vector<std::byte> buffer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& t = tensors[i];
    if (sizes[i] == 0) continue;
    // A 0-d tensor is one row; otherwise rows are slices along dim 0 (shape[0] > 0 here).
    const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    const uint64_t row_bytes = sizes[i] / static_cast<uint64_t>(rows);
    const int64_t rows_per_chunk = static_cast<int64_t>(std::clamp<uint64_t>(options.chunk_bytes / row_bytes, 1, rows));
    buffer.resize(static_cast<size_t>(rows_per_chunk) * row_bytes);
    for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
      const int64_t r1 = std::min(rows, r0 + rows_per_chunk);
      const std::span<std::byte> chunk(buffer.data(), static_cast<size_t>(r1 - r0) * row_bytes);
      t.fill(r0, r1, chunk);
      out.write(chunk.data(), chunk.size());
      done += chunk.size();
      if (options.progress) options.progress(done, total);
    }
  }
  out.commit();
}

TensorSpec tensor_from_bytes(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<std::byte> bytes) {
  const auto nbytes = checked_nbytes(shape, dtype);
  if (!nbytes)
    fail("tensor '{}': shape {} of {} is negative or overflows a 64-bit byte count", printable_name(name),
         dims_string(shape), dtype_name(dtype));
  if (*nbytes != bytes.size())
    fail("tensor '{}': {} bytes given but shape {} of {} needs {}", printable_name(name), bytes.size(),
         dims_string(shape), dtype_name(dtype), *nbytes);
  TensorSpec spec;
  spec.name = std::move(name);
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  const uint64_t rows = spec.shape.empty() ? 1 : static_cast<uint64_t>(spec.shape[0]);
  const uint64_t row_bytes = rows == 0 ? 0 : *nbytes / rows;
  auto data = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  spec.fill = [data, row_bytes](int64_t r0, int64_t r1, std::span<std::byte> out) {
    const size_t offset = static_cast<size_t>(r0) * row_bytes;
    const size_t n = static_cast<size_t>(r1 - r0) * row_bytes;
    if (out.size() != n || offset + n > data->size()) fail("tensor fill: rows [{}, {}) out of range", r0, r1);
    std::memcpy(out.data(), data->data() + offset, n);
  };
  return spec;
}

}  // namespace specula
