// Fuzz entry: a whole checkpoint directory through the loader. The input describes the directory
// (config.json text, the tensor inventory, optionally model.safetensors.index.json) and the entry
// writes it to a per-process temp dir with real safetensors files, then runs load_target (or
// load_drafter), builds the TargetModel's weight views (make_target_weights), packs them for the
// fast kernels and builds the inspect summary, and in one mode the value scan of `inspect --check`. The inventory is a
// line-based text, so the mutator edits names, dtypes and shapes directly, and the seeds (real synth presets) keep the
// fuzzer deep inside the loader instead of stopping at the first missing tensor.
//
// Input: byte 0 = flags, then sections separated by '\0':
//   <config.json> \0 <tensor lines> \0 <model.safetensors.index.json> \0 <extra JSON>
// flags bit 0: drafter mode: load_drafter, and check_drafter_compat against <extra> parsed as the
//              target's config.json; target mode: <extra> is generation_config.json.
// flags bits 1-2: tensor values: 0 small finite numbers, 1 zeros, 2-3 arbitrary bit patterns
//              (NaN and Inf included); 3 also runs the `inspect --check` value scan (it reads
//              every byte, slow under the sanitizers, so one mode in four pays for it). In modes
//              0 and 1, I64/I32/I8/U8 tensors hold 0, 1, 2, ... so a token_ordering can be a
//              permutation; U32 (packed codes) is arbitrary in mode 0.
// Tensor line: "NAME DTYPE DIMS [SHARD]", DIMS comma-separated ("-" = 0-d), SHARD 0..3. Lines that
// do not parse are skipped. All in shard 0 and no index section -> model.safetensors; otherwise
// model-0000<s+1>-of-0000<n>.safetensors, with the index section written verbatim, or generated
// from the lines when the section is empty. Empty sections leave their file out.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fuzz_entries.h"
#include "specula/io/checkpoint.h"
#include "specula/io/checkpoint_summary.h"
#include "specula/io/config.h"
#include "specula/io/safetensors.h"
#include "specula/io/tensor_check.h"
#include "specula/kernels/packed_affine.h"
#include "specula/model/target_weights.h"
#include "specula/util/error.h"

namespace specula::fuzz {
namespace {

namespace fs = std::filesystem;

// Bounds that keep one execution to a few milliseconds; inputs beyond them are ignored.
constexpr uint64_t kMaxDataBytes = 4u << 20;  // all tensors together (tiny presets need < 2 MB)
constexpr size_t kMaxTensors = 2048;
constexpr size_t kMaxDims = 4;
constexpr int kMaxShards = 4;

struct TensorLine {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int shard = 0;
};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::optional<int64_t> parse_int(std::string_view s, int64_t max) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

std::optional<TensorLine> parse_line(std::string_view line) {
  std::vector<std::string_view> f;
  for (std::string_view w : split(line, ' '))
    if (!w.empty()) f.push_back(w);
  if (f.size() < 3 || f.size() > 4) return std::nullopt;
  TensorLine t;
  t.name = std::string(f[0]);
  const std::optional<DType> dtype = parse_dtype(f[1]);
  if (!dtype) return std::nullopt;
  t.dtype = *dtype;
  if (f[2] != "-") {
    for (std::string_view d : split(f[2], ',')) {
      const std::optional<int64_t> v = parse_int(d, int64_t{1} << 40);
      if (!v || t.shape.size() == kMaxDims) return std::nullopt;
      t.shape.push_back(*v);
    }
  }
  if (f.size() == 4) {
    const std::optional<int64_t> s = parse_int(f[3], kMaxShards - 1);
    if (!s) return std::nullopt;
    t.shard = static_cast<int>(*s);
  }
  return t;
}

// Bytes of a tensor, or nullopt past kMaxDataBytes (checked per factor, so no overflow).
std::optional<uint64_t> bounded_bytes(const TensorLine& t) {
  uint64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d == 0) return 0;
    if (n > kMaxDataBytes / static_cast<uint64_t>(d)) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer: the "arbitrary" value of element x
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i of a tensor, written little-endian into `out` (dtype_size bytes).
void element(DType dtype, int mode, uint64_t salt, int64_t i, std::byte* out) {
  const uint64_t h = mix(salt ^ static_cast<uint64_t>(i));
  const size_t width = dtype_size(dtype);
  uint64_t bits = 0;
  if (mode >= 2) {
    bits = h;
  } else if (dtype == DType::I32 || dtype == DType::I64 || dtype == DType::U8 || dtype == DType::I8) {
    bits = static_cast<uint64_t>(i);
  } else if (mode == 1 || dtype == DType::U32) {
    bits = mode == 1 ? 0 : h;
  } else if (dtype == DType::BF16) {
    bits = 0x3C00u | (h & 0x807Fu);  // +-[2^-7, 2^-6): finite and small
  } else if (dtype == DType::F16) {
    bits = 0x2000u | (h & 0x83FFu);
  } else if (dtype == DType::F32) {
    bits = 0x3C000000u | (h & 0x807FFFFFu);
  } else if (dtype == DType::F64) {
    bits = 0x3F80000000000000ull | (h & 0x800FFFFFFFFFFFFFull);
  }
  for (size_t b = 0; b < width; ++b) out[b] = static_cast<std::byte>((bits >> (8 * b)) & 0xff);
}

TensorSpec tensor_spec(const TensorLine& t, int mode) {
  TensorSpec s;
  s.name = t.name;
  s.dtype = t.dtype;
  s.shape = t.shape;
  const int64_t width = static_cast<int64_t>(dtype_size(t.dtype));
  int64_t row_elems = 1;
  for (size_t d = 1; d < t.shape.size(); ++d) row_elems *= t.shape[d];
  const uint64_t salt = std::hash<std::string>{}(t.name);
  const bool counting =
      mode < 2 && (t.dtype == DType::I32 || t.dtype == DType::I64 || t.dtype == DType::U8 || t.dtype == DType::I8);
  if (counting) {  // element by element: 0, 1, 2, ...
    s.fill = [dtype = t.dtype, mode, salt, width, row_elems](int64_t r0, int64_t r1, std::span<std::byte> out) {
      const int64_t n = std::min((r1 - r0) * row_elems, static_cast<int64_t>(out.size()) / width);
      for (int64_t i = 0; i < n; ++i) element(dtype, mode, salt, r0 * row_elems + i, out.data() + i * width);
    };
    return s;
  }
  // Everything else repeats a 4 KB block of elements: per-element work under the sanitizers'
  // coverage hooks would dominate an execution (tiny checkpoints are megabytes).
  auto block = std::make_shared<std::vector<std::byte>>(4096);
  for (int64_t i = 0; i < 4096 / width; ++i) element(t.dtype, mode, salt, i, block->data() + i * width);
  s.fill = [block, width, row_elems](int64_t r0, int64_t, std::span<std::byte> out) {
    const size_t start = static_cast<size_t>(r0 * row_elems * width) % block->size();
    size_t done = 0;
    while (done < out.size()) {
      const size_t from = (start + done) % block->size();
      const size_t n = std::min(out.size() - done, block->size() - from);
      std::memcpy(out.data() + done, block->data() + from, n);
      done += n;
    }
  };
  return s;
}

void write_text(const fs::path& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
}

std::string shard_name(int s, int n) { return fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n); }

// Writes the directory; false if the input lies outside the bounds (nothing to test).
bool write_dir(const fs::path& dir, std::string_view config, std::string_view tensors, std::string_view index,
               std::string_view generation, int mode) {
  std::vector<TensorLine> lines;
  std::set<std::pair<int, std::string>> seen;  // the writer rejects a name twice in one file
  uint64_t total = 0;
  for (std::string_view l : split(tensors, '\n')) {
    std::optional<TensorLine> t = parse_line(l);
    if (!t || !seen.insert({t->shard, t->name}).second) continue;
    const std::optional<uint64_t> bytes = bounded_bytes(*t);
    if (!bytes || (total += *bytes) > kMaxDataBytes || lines.size() == kMaxTensors) return false;
    lines.push_back(std::move(*t));
  }
  if (!config.empty()) write_text(dir / "config.json", config);
  if (!generation.empty()) write_text(dir / "generation_config.json", generation);

  int shards = 1;
  for (const TensorLine& t : lines) shards = std::max(shards, t.shard + 1);
  const bool single = shards == 1 && index.empty();
  std::vector<std::vector<TensorSpec>> files(static_cast<size_t>(shards));
  nlohmann::json weight_map = nlohmann::json::object();
  for (const TensorLine& t : lines) {
    files[static_cast<size_t>(t.shard)].push_back(tensor_spec(t, mode));
    weight_map[t.name] = shard_name(t.shard, shards);
  }
  for (int s = 0; s < shards; ++s)
    write_safetensors((dir / (single ? std::string("model.safetensors") : shard_name(s, shards))).string(),
                      files[static_cast<size_t>(s)]);
  if (!single) {
    const std::string generated =
        nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", weight_map}}.dump();
    write_text(dir / "model.safetensors.index.json", index.empty() ? std::string_view(generated) : index);
  }
  return true;
}

void load_target_dir(const std::string& dir, bool scan_values) {
  const TargetCheckpoint ck = load_target(dir);
  TargetWeights w = make_target_weights(ck);
  // The fast kernels' layout, as a fast-precision load packs it (a `superblock` claim in the
  // config is checked against the scales here).
  ThreadPool one(1);
  const PackedBuffer packed = pack_matrices(w.matmul_matrices(), one);
  (void)w.matrix_bytes_per_token(true);
  (void)format_summary(summarize_checkpoint(ck));
  if (scan_values) (void)check_tensor_values(ck.store);
}

void load_drafter_dir(const std::string& dir, std::string_view target_config, bool scan_values) {
  const DrafterCheckpoint ck = load_drafter(dir);
  if (scan_values) (void)check_tensor_values(ck.store);
  const nlohmann::json raw = nlohmann::json::parse(target_config, nullptr, /*allow_exceptions=*/false);
  if (raw.is_discarded()) return;
  TargetConfig target = parse_target_config(raw, "fuzz/target/config.json");
  update_target_geometry(target);
  (void)check_drafter_compat(target, ck.config);
}

}  // namespace

int fuzz_checkpoint_dir(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::vector<std::string_view> sections =
      split(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), '\0');
  const auto section = [&](size_t i) { return i < sections.size() ? sections[i] : std::string_view{}; };
  const bool drafter = flags & 1;
  const int mode = (flags >> 1) & 3;

  const fs::path dir = fs::temp_directory_path() / ("specula-fuzz-ckpt-" + std::to_string(getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  try {
    if (write_dir(dir, section(0), section(1), section(2), drafter ? std::string_view{} : section(3), mode)) {
      if (drafter)
        load_drafter_dir(dir.string(), section(3), mode == 3);
      else
        load_target_dir(dir.string(), mode == 3);
    }
  } catch (const specula::Error& e) {
    // For corpus work: which check stopped an input (the seeds should load without any).
    if (std::getenv("SPECULA_FUZZ_VERBOSE")) std::fprintf(stderr, "checkpoint_dir: %s\n", e.what());
  }
  fs::remove_all(dir, ec);
  return 0;
}

}  // namespace specula::fuzz
