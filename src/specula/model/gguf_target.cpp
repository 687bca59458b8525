// GGUF file -> TargetCheckpoint or DrafterCheckpoint (docs/gguf.md): metadata through io/gguf_config, tensor names
// through io/gguf_names, tensor data converted here into a safetensors image (in memory, or in the
// image cache of model/gguf_image_cache.h) or only described (GgufLoadOptions::convert), then the
// same validation as a safetensors directory (io/checkpoint.cpp).
#include "specula/model/gguf_target.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "specula/io/gguf.h"
#include "specula/io/gguf_config.h"
#include "specula/io/gguf_names.h"
#include "specula/kernels/ggml_affine.h"
#include "specula/kernels/ggml_quants.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/shared_scales.h"
#include "specula/model/gguf_image_cache.h"
#include "specula/util/alignment.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

namespace fs = std::filesystem;

namespace {

// One tensor of the converted store: bytes from the GGUF mapping (`in_place`), converted here, or
// none (a planned or described tensor).
struct PendingTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> in_place;
  std::vector<std::byte> owned;
  std::span<const std::byte> bytes() const { return owned.empty() ? in_place : std::span<const std::byte>(owned); }
  // The bytes its dtype and shape take in the image, whether or not they are here.
  uint64_t size() const {
    uint64_t n = dtype_size(dtype);
    for (const int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

// What a TensorConverter makes of each tensor.
enum class ConvertMode {
  Convert,  // the tensors of the image, with their bytes
  // Names and shapes only, scales and biases as f32: what the image's header may need room for.
  Plan,
  // Names, shapes and the formats a conversion gives well-formed blocks, without reading the
  // blocks: the 1-d tensors (norms, scalars) with their bytes, which the model's weights read at
  // load, the others without (GgufLoadOptions::convert).
  Describe,
};

// The dtype a conversion gives a quantized type's scales and biases, decided without reading its
// blocks. Conversion stores them as f16 when every value is exact in f16: for Q4_0, Q4_1, Q5_0,
// Q5_1 and Q8_0 they are the blocks' f16 d and m, or d times -8, -16 or -128, exact unless a
// block is NaN or overflows f16; for the K-quants they are products of d with 4- to 8-bit
// sub-block scales, which f16 holds for a whole tensor of real weights only by chance.
DType described_param_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0: return DType::F16;
    default: return DType::F32;
  }
}

std::vector<int64_t> logical_shape(const GgufTensor& t) { return {t.dims.rbegin(), t.dims.rend()}; }

template <typename T>
std::vector<std::byte> as_bytes(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Scales and biases are stored as f16 when every value converts exactly (the 4-bit types' d and
// m are f16 already), else as f32.
bool exact_in_f16(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return f16_to_f32(f32_to_f16(x)) == x; });
}

// GGUF tensors -> tensors under their safetensors names, in the formats io/checkpoint.cpp
// validates (dense float, or the MLX affine triple); records quantized modules in the config's
// `quantization` block (except when planning).
class TensorConverter {
 public:
  TensorConverter(const GgufFile& f, nlohmann::json& config, ConvertMode mode = ConvertMode::Convert)
      : f_(f), config_(config), mode_(mode) {
    fused_experts_ = std::any_of(f.tensors().begin(), f.tensors().end(),
                                 [](const GgufTensor& t) { return t.name.ends_with("ffn_gate_up_exps.weight"); });
  }

  void add(const GgufTensor& t) {
    const std::optional<std::string> hf = gguf_to_hf_name(t.name, fused_experts_);
    if (!hf) return;  // rope_freqs (read by the config) and tensors Gemma 4 text does not use
    switch (t.type) {
      case GgmlType::F32: return in_place(t, *hf, DType::F32);
      case GgmlType::F16: return in_place(t, *hf, DType::F16);
      case GgmlType::BF16: return in_place(t, *hf, DType::BF16);
      default: break;
    }
    if (ggml_affine_bits(t.type) > 0 && t.dims.size() >= 2) return affine(t, *hf);
    if (ggml_dequant_supported(t.type)) return dequantized(t, *hf);
    fail(
        "{}: tensor {} is {}, which specula cannot load (it loads f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, "
        "q4_K, q5_K and q6_K)",
        f_.path(), t.name, ggml_type_name(t.type));
  }

  // The tensors added since the last call.
  std::vector<PendingTensor> take() { return std::exchange(out_, {}); }

 private:
  void push(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<std::byte> owned,
            std::span<const std::byte> in_place = {}) {
    out_.push_back({std::move(name), dtype, std::move(shape), in_place, std::move(owned)});
  }

  // Whether t's bytes are left out: always when planning; when describing, all but the 1-d tensors'.
  bool without_bytes(const GgufTensor& t) const {
    return mode_ == ConvertMode::Plan || (mode_ == ConvertMode::Describe && t.dims.size() > 1);
  }

  void in_place(const GgufTensor& t, const std::string& hf, DType dtype) {
    if (without_bytes(t)) return push(hf, dtype, logical_shape(t), {});
    push(hf, dtype, logical_shape(t), {}, std::span<const std::byte>(t.data, t.nbytes));
  }

  void dequantized(const GgufTensor& t, const std::string& hf) {
    const int64_t rows = t.rows(), n = t.ne0();
    if (without_bytes(t)) return push(hf, DType::F32, logical_shape(t), {});
    std::vector<std::byte> out(static_cast<size_t>(rows * n) * sizeof(float));
    auto* values = reinterpret_cast<float*>(out.data());
    for (int64_t r = 0; r < rows; ++r) dequantize_gguf_row(t, r, values + r * n);
    push(hf, DType::F32, logical_shape(t), std::move(out));
  }

  // Repacks the blocks as MLX affine codes (docs/gemma4.md §4) with their group scales and
  // biases (kernels/ggml_affine.h: the same values, bit for bit).
  void affine(const GgufTensor& t, const std::string& hf) {
    const int bits = ggml_affine_bits(t.type), group = ggml_affine_group(t.type);
    const int64_t rows = t.rows(), n = t.ne0(), groups = n / group, words = n * bits / 32;
    const std::string module = hf.substr(0, hf.size() - std::string(".weight").size());
    std::vector<int64_t> shape = logical_shape(t), group_shape = shape;
    shape.back() = words;
    group_shape.back() = groups;
    if (mode_ != ConvertMode::Convert) {
      const DType params = mode_ == ConvertMode::Plan ? DType::F32 : described_param_dtype(t.type);
      push(hf, DType::U32, shape, {});
      push(module + ".scales", params, group_shape, {});
      push(module + ".biases", params, group_shape, {});
      // Conversion also checks every block for the shared factors (ggml_scales_share_factors),
      // which the blocks a quantizer writes from finite weights keep: only a damaged file's
      // conversion differs.
      if (mode_ == ConvertMode::Describe) record_quantization(t, module, shares_factors(t));
      return;
    }
    // Converted straight into the byte buffers the image is written from: no second copy of a
    // multi-GB tensor.
    std::vector<std::byte> packed(static_cast<size_t>(rows * words) * sizeof(uint32_t));
    std::vector<std::byte> scale_bytes(static_cast<size_t>(rows * groups) * sizeof(float)),
        bias_bytes(scale_bytes.size());
    const std::span<uint32_t> all_words(reinterpret_cast<uint32_t*>(packed.data()), static_cast<size_t>(rows * words));
    const std::span<float> scales(reinterpret_cast<float*>(scale_bytes.data()), static_cast<size_t>(rows * groups));
    const std::span<float> biases(reinterpret_cast<float*>(bias_bytes.data()), scales.size());
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    // The fast kernels keep K-quant scales as shared factors (kernels/packed_affine.h) when every
    // row's blocks allow it.
    bool shared = shares_factors(t);
    for (int64_t r = 0; r < rows; ++r) {
      const std::byte* src = t.data + static_cast<size_t>(r) * t.row_bytes();
      ggml_row_to_affine(t.type, src, n, codes.data(), scales.data() + r * groups, biases.data() + r * groups);
      pack_codes(codes, bits, all_words.subspan(static_cast<size_t>(r * words), static_cast<size_t>(words)));
      shared = shared && ggml_scales_share_factors(t.type, src, n);
    }
    push(hf, DType::U32, shape, std::move(packed));
    if (exact_in_f16(scales) && exact_in_f16(biases)) {
      push(module + ".scales", DType::F16, group_shape, as_bytes(to_f16(scales)));
      push(module + ".biases", DType::F16, group_shape, as_bytes(to_f16(biases)));
    } else {
      push(module + ".scales", DType::F32, group_shape, std::move(scale_bytes));
      push(module + ".biases", DType::F32, group_shape, std::move(bias_bytes));
    }
    record_quantization(t, module, shared);
  }

  // Whether t's format can keep its scales as shared factors, before its blocks are read.
  static bool shares_factors(const GgufTensor& t) {
    return shared_factor_format(ggml_affine_bits(t.type), ggml_affine_group(t.type)) && ggml_block_size(t.type) == 256;
  }

  void record_quantization(const GgufTensor& t, const std::string& module, bool shared) {
    const int bits = ggml_affine_bits(t.type), group = ggml_affine_group(t.type);
    nlohmann::json& q = config_["quantization"];
    if (q.is_null()) q = {{"bits", bits}, {"group_size", group}, {"mode", "affine"}};
    q[module] = {{"bits", bits}, {"group_size", group}};
    if (shared) q[module]["superblock"] = 256;
    // Q6_K's codes are 6-bit: kept as 8-bit ones, so the exact kernels read them as fast as Q8_0's,
    // and marked so that the fast kernels' layout holds them as 6-bit (kernels/packed_affine.h).
    if (t.type == GgmlType::Q6_K) q[module]["code_bits"] = 6;
  }

  static std::vector<uint16_t> to_f16(std::span<const float> v) {
    std::vector<uint16_t> h(v.size());
    std::transform(v.begin(), v.end(), h.begin(), f32_to_f16);
    return h;
  }

  const GgufFile& f_;
  nlohmann::json& config_;
  ConvertMode mode_ = ConvertMode::Convert;
  bool fused_experts_ = false;
  std::vector<PendingTensor> out_;
};

// An open file descriptor, closed when the object dies.
class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// An anonymous in-memory file (memfd).
OwnedFd memory_file() {
  const int fd = ::memfd_create("specula-gguf", MFD_CLOEXEC);
  if (fd < 0) fail("cannot create an in-memory file for the converted tensors: {}", std::strerror(errno));
  return OwnedFd(fd);
}

// Writes the converted tensors as a safetensors file into `fd`, one GGUF tensor at a time (each
// buffer freed once written, so the conversion never holds more than one tensor). The header
// goes last into room reserved up front: the planned header with the widest offsets. Tensors
// without bytes (described ones) keep their place in the file as a hole that reads as zeros.
class ImageWriter {
 public:
  ImageWriter(int fd, const std::vector<PendingTensor>& plan) : fd_(fd) {
    nlohmann::json header = nlohmann::json::object();
    constexpr uint64_t kWidest = ~uint64_t{0};
    for (const PendingTensor& t : plan)
      header[t.name] = {
          {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {kWidest, kWidest}}};
    header_room_ = round_up(8 + header.dump().size(), kAlign) - 8;
  }

  void write(std::vector<PendingTensor> tensors) {
    for (PendingTensor& t : tensors) {
      data_ = round_up(data_, kAlign);
      const uint64_t n = t.size();
      if (!t.bytes().empty() && t.bytes().size() != n)
        fail("converted tensor {} has {} bytes, its shape {} bytes", t.name, t.bytes().size(), n);
      header_[t.name] = {
          {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {data_, data_ + n}}};
      write_at(8 + header_room_ + data_, t.bytes());
      data_ += n;
      std::vector<std::byte>().swap(t.owned);
    }
  }

  // The header and its length; an empty data region still gets one byte (a file to map).
  void finish() {
    std::string text = header_.dump();
    if (text.size() > header_room_) fail("the converted tensors' header outgrew its {} bytes", header_room_);
    text.resize(header_room_, ' ');
    std::array<std::byte, 8> len{};
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
    write_at(0, len);
    write_at(8, std::as_bytes(std::span<const char>(text)));
    if (data_ == 0) write_at(8 + header_room_, std::array<std::byte, 1>{});
    // Holes at the end: the file still reaches the last tensor's end.
    if (data_ > 0 && ::ftruncate(fd_, static_cast<off_t>(8 + header_room_ + data_)) != 0)
      fail("cannot size the converted tensors' file: {}", std::strerror(errno));
  }

 private:
  static constexpr uint64_t kAlign = 64;

  void write_at(uint64_t offset, std::span<const std::byte> bytes) const {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("cannot write the converted tensors: {}", n < 0 ? std::strerror(errno) : "no space");
      done += static_cast<size_t>(n);
    }
  }

  int fd_;
  uint64_t header_room_ = 0;
  uint64_t data_ = 0;
  nlohmann::json header_ = nlohmann::json::object();
};

// Converts (or describes) every tensor of the GGUF into `fd` (conversion errors are thrown before
// anything is written); `config` receives the quantization block.
void write_image(const GgufFile& gguf, nlohmann::json& config, int fd, ConvertMode mode = ConvertMode::Convert) {
  nlohmann::json plan_config = config;
  TensorConverter planner(gguf, plan_config, ConvertMode::Plan);
  for (const GgufTensor& t : gguf.tensors()) planner.add(t);
  ImageWriter writer(fd, planner.take());
  TensorConverter converter(gguf, config, mode);
  for (const GgufTensor& t : gguf.tensors()) {
    converter.add(t);
    writer.write(converter.take());
  }
  writer.finish();
}

// Error messages of the shared validation name the image file and the safetensors names:
// put back the GGUF file and its tensor names.
std::string in_gguf_terms(const std::string& message, const std::string& image_dir, const std::string& file) {
  std::string m = message;
  for (size_t at = m.find(image_dir); at != std::string::npos; at = m.find(image_dir, at + file.size())) {
    size_t end = at + image_dir.size();
    if (end < m.size() && m[end] == '/') {  // the image file in it: "/N" (a memfd) or "/model.safetensors"
      auto in_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_'; };
      for (++end; end < m.size() && in_name(m[end]);) ++end;
    }
    m.replace(at, end - at, file);
  }
  return with_gguf_names(m);
}

bool has_gguf_extension(const fs::path& p) { return p.extension() == ".gguf"; }

// A file of any name that starts with GGUF's magic (an Ollama blob is named by its digest).
bool has_gguf_magic(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::array<char, 4> magic{};
  return in.read(magic.data(), magic.size()) && std::string_view(magic.data(), magic.size()) == "GGUF";
}

}  // namespace

std::optional<std::string> gguf_file_of(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_regular_file(p, ec)) {
    return has_gguf_extension(p) || has_gguf_magic(p) ? std::optional<std::string>(path) : std::nullopt;
  }
  if (!fs::is_directory(p, ec) || fs::exists(p / "config.json", ec)) return std::nullopt;
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (has_gguf_extension(e.path()) && e.is_regular_file(ec)) found.push_back(e.path().string());
  if (found.empty()) return std::nullopt;
  std::sort(found.begin(), found.end());
  if (found.size() > 1) {
    std::string names;
    for (const std::string& f : found) names += (names.empty() ? "" : ", ") + fs::path(f).filename().string();
    fail("{} holds {} .gguf files ({}) and no config.json: give the one to load as --model FILE.gguf", path,
         found.size(), names);
  }
  return found.front();
}

namespace {

void warn(const std::string& line) { std::fprintf(stderr, "specula: warning: %s\n", line.c_str()); }

// The GGUF's image in memory: the store owns the mapping, so the checkpoint keeps its weights
// alive as it does for files.
TensorStore image_in_memory(const GgufFile& gguf, nlohmann::json& config) {
  const OwnedFd file = memory_file();
  write_image(gguf, config, file.get());
  return TensorStore::open_files({fmt::format("/proc/self/fd/{}", file.get())});
}

// The GGUF's image described in memory: its header and 1-d tensors, the rest a hole (a few MB
// of memory, nothing read from the GGUF's matrices).
TensorStore image_described(const GgufFile& gguf, nlohmann::json& config) {
  const OwnedFd file = memory_file();
  write_image(gguf, config, file.get(), ConvertMode::Describe);
  return TensorStore::open_files({fmt::format("/proc/self/fd/{}", file.get())});
}

// The GGUF's image written into its cache entry (model/gguf_image_cache.h).
TensorStore image_in_cache(const GgufFile& gguf, nlohmann::json& config, const GgufImageEntry& entry) {
  const std::string temp = gguf_image_temp_path(entry);
  try {
    const OwnedFd file(::open(temp.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644));
    if (file.get() < 0) fail("cannot create {}: {}", temp, std::strerror(errno));
    write_image(gguf, config, file.get());
  } catch (...) {
    std::error_code ec;
    fs::remove(temp, ec);
    throw;
  }
  commit_gguf_image(entry, temp, config.contains("quantization") ? config["quantization"] : nlohmann::json());
  return TensorStore::open_files({entry.image});
}

// The GGUF's tensors converted into a safetensors store (cached under options.image_cache_dir
// when set; described instead of converted when options.convert is false and no current image is
// cached), handed with `config` to the safetensors loader `load`; its errors are put back into
// the GGUF's terms. A cache that cannot be read or written costs one warning and a conversion in
// memory, never the load.
template <typename Checkpoint, typename Load>
Checkpoint load_converted(const GgufFile& gguf, const nlohmann::json& gguf_config, const GgufLoadOptions& options,
                          Load load) {
  auto load_store = [&](TensorStore store, nlohmann::json config, GgufImageSource source) {
    const std::string image_dir = store.dir();
    try {
      Checkpoint ck = load(config, gguf.path(), std::move(store));
      ck.dir = gguf.path();
      ck.gguf_image = source;
      return ck;
    } catch (const Error& e) {
      throw Error(in_gguf_terms(e.what(), image_dir, gguf.path()));
    }
  };
  std::error_code size_error;
  const uintmax_t file_bytes = fs::file_size(gguf.path(), size_error);
  if (!options.image_cache_dir.empty() && !size_error && file_bytes >= options.min_cached_file_bytes) {
    std::optional<GgufImageEntry> entry;
    try {
      entry = gguf_image_entry(options.image_cache_dir, gguf.path());
      if (const std::optional<nlohmann::json> quantization = find_gguf_image(*entry)) {
        nlohmann::json config = gguf_config;
        if (!quantization->is_null()) config["quantization"] = *quantization;
        return load_store(TensorStore::open_files({entry->image}), config, GgufImageSource::CacheHit);
      }
    } catch (const Error& e) {
      warn(fmt::format("cached GGUF image not used ({}){}", e.what(),
                       options.convert ? "; converting the file again" : ""));
    }
    if (entry && options.convert) {
      nlohmann::json config = gguf_config;
      std::optional<TensorStore> store;
      try {
        store = image_in_cache(gguf, config, *entry);
      } catch (const Error& e) {
        warn(fmt::format("GGUF image not cached ({}); converting it in memory", e.what()));
      }
      if (store) {
        try {
          return load_store(std::move(*store), config, GgufImageSource::CacheWritten);
        } catch (...) {  // a file that does not validate: keep no image of it
          std::error_code ec;
          fs::remove_all(entry->dir, ec);
          throw;
        }
      }
    }
  }
  nlohmann::json config = gguf_config;
  if (!options.convert) {
    TensorStore store = image_described(gguf, config);
    return load_store(std::move(store), config, GgufImageSource::Described);
  }
  TensorStore store = image_in_memory(gguf, config);
  return load_store(std::move(store), config, GgufImageSource::Memory);
}

}  // namespace

TargetCheckpoint load_gguf_target(const std::string& file, const GgufLoadOptions& options) {
  const GgufFile gguf = GgufFile::open(file);
  return load_converted<TargetCheckpoint>(gguf, gguf_target_config(gguf), options,
                                          [](const nlohmann::json& c, const std::string& source, TensorStore s) {
                                            return load_target(c, source, std::move(s));
                                          });
}

DrafterCheckpoint load_gguf_drafter(const std::string& file, const GgufLoadOptions& options) {
  const GgufFile gguf = GgufFile::open(file);
  return load_converted<DrafterCheckpoint>(gguf, gguf_drafter_config(gguf), options,
                                           [](const nlohmann::json& c, const std::string& source, TensorStore s) {
                                             return load_drafter(c, source, std::move(s));
                                           });
}

TargetCheckpoint load_any_target(const std::string& path, const GgufLoadOptions& options) {
  if (const auto file = gguf_file_of(path)) return load_gguf_target(*file, options);
  return load_target(path);
}

DrafterCheckpoint load_any_drafter(const std::string& path, const GgufLoadOptions& options) {
  if (const auto file = gguf_file_of(path)) return load_gguf_drafter(*file, options);
  return load_drafter(path);
}

}  // namespace specula
