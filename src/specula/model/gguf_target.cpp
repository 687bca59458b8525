// GGUF file -> TargetCheckpoint or DrafterCheckpoint (docs/gguf.md): metadata through io/gguf_config, tensor names
// through io/gguf_names, tensor data converted here into an in-memory safetensors image, then the
// same validation as a safetensors directory (io/checkpoint.cpp).
#include "specula/model/gguf_target.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "specula/io/gguf.h"
#include "specula/io/gguf_config.h"
#include "specula/io/gguf_names.h"
#include "specula/kernels/ggml_affine.h"
#include "specula/kernels/ggml_quants.h"
#include "specula/kernels/quant.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

namespace fs = std::filesystem;

namespace {

// One tensor of the converted store: bytes from the GGUF mapping (`in_place`) or converted here.
struct PendingTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> in_place;
  std::vector<std::byte> owned;
  std::span<const std::byte> bytes() const { return owned.empty() ? in_place : std::span<const std::byte>(owned); }
};

std::vector<int64_t> logical_shape(const GgufTensor& t) { return {t.dims.rbegin(), t.dims.rend()}; }

template <typename T>
std::vector<std::byte> as_bytes(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Scales and biases are stored as f16 when every value converts exactly (the 4-bit types' d and
// m are f16 already), else as f32.
bool exact_in_f16(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return f16_to_f32(f32_to_f16(x)) == x; });
}

// GGUF tensors -> tensors under their safetensors names, in the formats io/checkpoint.cpp
// validates (dense float, or the MLX affine triple); records quantized modules in the config's
// `quantization` block.
class TensorConverter {
 public:
  TensorConverter(const GgufFile& f, nlohmann::json& config) : f_(f), config_(config) {
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

  std::vector<PendingTensor>& tensors() { return out_; }

 private:
  void push(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<std::byte> owned,
            std::span<const std::byte> in_place = {}) {
    out_.push_back({std::move(name), dtype, std::move(shape), in_place, std::move(owned)});
  }

  void in_place(const GgufTensor& t, const std::string& hf, DType dtype) {
    push(hf, dtype, logical_shape(t), {}, std::span<const std::byte>(t.data, t.nbytes));
  }

  void dequantized(const GgufTensor& t, const std::string& hf) {
    const int64_t rows = t.rows(), n = t.ne0();
    std::vector<float> out(static_cast<size_t>(rows * n));
    for (int64_t r = 0; r < rows; ++r) dequantize_gguf_row(t, r, out.data() + r * n);
    push(hf, DType::F32, logical_shape(t), as_bytes(out));
  }

  // Repacks the blocks as MLX affine codes (docs/gemma4.md §4) with their group scales and
  // biases (kernels/ggml_affine.h: the same values, bit for bit).
  void affine(const GgufTensor& t, const std::string& hf) {
    const int bits = ggml_affine_bits(t.type), group = ggml_affine_group(t.type);
    const int64_t rows = t.rows(), n = t.ne0(), groups = n / group, words = n * bits / 32;
    std::vector<uint32_t> packed(static_cast<size_t>(rows * words));
    std::vector<float> scales(static_cast<size_t>(rows * groups)), biases(scales.size());
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const std::byte* src = t.data + static_cast<size_t>(r) * t.row_bytes();
      ggml_row_to_affine(t.type, src, n, codes.data(), scales.data() + r * groups, biases.data() + r * groups);
      pack_codes(codes, bits, std::span<uint32_t>(packed.data() + r * words, static_cast<size_t>(words)));
    }
    const std::string module = hf.substr(0, hf.size() - std::string(".weight").size());
    std::vector<int64_t> shape = logical_shape(t), group_shape = shape;
    shape.back() = words;
    group_shape.back() = groups;
    push(hf, DType::U32, shape, as_bytes(packed));
    if (exact_in_f16(scales) && exact_in_f16(biases)) {
      push(module + ".scales", DType::F16, group_shape, as_bytes(to_f16(scales)));
      push(module + ".biases", DType::F16, group_shape, as_bytes(to_f16(biases)));
    } else {
      push(module + ".scales", DType::F32, group_shape, as_bytes(scales));
      push(module + ".biases", DType::F32, group_shape, as_bytes(biases));
    }
    nlohmann::json& q = config_["quantization"];
    if (q.is_null()) q = {{"bits", bits}, {"group_size", group}, {"mode", "affine"}};
    q[module] = {{"bits", bits}, {"group_size", group}};
  }

  static std::vector<uint16_t> to_f16(const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    std::transform(v.begin(), v.end(), h.begin(), f32_to_f16);
    return h;
  }

  const GgufFile& f_;
  nlohmann::json& config_;
  bool fused_experts_ = false;
  std::vector<PendingTensor> out_;
};

// An anonymous in-memory file (memfd), closed when the object dies.
class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("specula-gguf", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("cannot create an in-memory file for the converted tensors: {}", std::strerror(errno));
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  std::string path() const { return fmt::format("/proc/self/fd/{}", fd_); }
  void write_at(uint64_t offset, std::span<const std::byte> bytes) const {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (n <= 0) fail("cannot write the converted tensors to memory: {}", std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
};

uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// The converted tensors as a safetensors image in memory, opened as an ordinary TensorStore (the
// store owns the mapping, so the checkpoint keeps its weights alive as it does for files). Each
// buffer is freed as soon as it is written.
TensorStore store_in_memory(std::vector<PendingTensor>& tensors) {
  constexpr uint64_t kAlign = 64;
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint64_t> offsets;
  uint64_t data = 0;
  for (const PendingTensor& t : tensors) {
    data = round_up(data, kAlign);
    offsets.push_back(data);
    const uint64_t n = t.bytes().size();
    header[t.name] = {
        {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {data, data + n}}};
    data += n;
  }
  std::string text = header.dump();
  text.resize(round_up(8 + text.size(), kAlign) - 8, ' ');
  const MemoryFile file;
  std::array<std::byte, 8> len{};
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
  file.write_at(0, len);
  file.write_at(8, std::as_bytes(std::span<const char>(text)));
  const uint64_t base = 8 + text.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    file.write_at(base + offsets[i], tensors[i].bytes());
    std::vector<std::byte>().swap(tensors[i].owned);
  }
  if (data == 0) file.write_at(base, std::array<std::byte, 1>{});  // an empty data region still needs a file
  return TensorStore::open_files({file.path()});
}

// Error messages of the shared validation name the in-memory image and the safetensors names:
// put back the GGUF file and its tensor names.
std::string in_gguf_terms(const std::string& message, const std::string& image_dir, const std::string& file) {
  std::string m = message;
  for (size_t at = m.find(image_dir); at != std::string::npos; at = m.find(image_dir, at + file.size())) {
    size_t end = at + image_dir.size();
    if (end < m.size() && m[end] == '/')  // "/proc/self/fd/N"
      for (++end; end < m.size() && std::isdigit(static_cast<unsigned char>(m[end]));) ++end;
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

// The GGUF's tensors converted into an in-memory safetensors store, handed with `config` to the
// safetensors loader `load`; its errors are put back into the GGUF's terms.
template <typename Checkpoint, typename Load>
Checkpoint load_converted(const GgufFile& gguf, nlohmann::json config, Load load) {
  TensorConverter converter(gguf, config);
  for (const GgufTensor& t : gguf.tensors()) converter.add(t);
  TensorStore store = store_in_memory(converter.tensors());
  const std::string image_dir = store.dir();
  try {
    Checkpoint ck = load(config, gguf.path(), std::move(store));
    ck.dir = gguf.path();
    return ck;
  } catch (const Error& e) {
    throw Error(in_gguf_terms(e.what(), image_dir, gguf.path()));
  }
}

}  // namespace

TargetCheckpoint load_gguf_target(const std::string& file) {
  const GgufFile gguf = GgufFile::open(file);
  return load_converted<TargetCheckpoint>(gguf, gguf_target_config(gguf),
                                          [](const nlohmann::json& c, const std::string& source, TensorStore s) {
                                            return load_target(c, source, std::move(s));
                                          });
}

DrafterCheckpoint load_gguf_drafter(const std::string& file) {
  const GgufFile gguf = GgufFile::open(file);
  return load_converted<DrafterCheckpoint>(gguf, gguf_drafter_config(gguf),
                                           [](const nlohmann::json& c, const std::string& source, TensorStore s) {
                                             return load_drafter(c, source, std::move(s));
                                           });
}

TargetCheckpoint load_any_target(const std::string& path) {
  if (const auto file = gguf_file_of(path)) return load_gguf_target(*file);
  return load_target(path);
}

DrafterCheckpoint load_any_drafter(const std::string& path) {
  if (const auto file = gguf_file_of(path)) return load_gguf_drafter(*file);
  return load_drafter(path);
}

}  // namespace specula
