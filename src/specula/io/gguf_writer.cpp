#include "specula/io/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "specula/util/alignment.h"
#include "specula/util/error.h"
#include "specula/util/temp_file.h"

namespace specula {

namespace {

template <typename T>
constexpr GgufType gguf_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>)
    return GgufType::U8;
  else if constexpr (std::is_same_v<T, int8_t>)
    return GgufType::I8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return GgufType::U16;
  else if constexpr (std::is_same_v<T, int16_t>)
    return GgufType::I16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return GgufType::U32;
  else if constexpr (std::is_same_v<T, int32_t>)
    return GgufType::I32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return GgufType::U64;
  else if constexpr (std::is_same_v<T, int64_t>)
    return GgufType::I64;
  else if constexpr (std::is_same_v<T, float>)
    return GgufType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return GgufType::F64;
  else
    static_assert(sizeof(T) == 0, "no GGUF type for T");
}

class Buffer {
 public:
  explicit Buffer(std::vector<std::byte>& out) : out_(out) {}
  void raw(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }
  template <typename T>
  void put(T v) {
    raw(&v, sizeof v);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    raw(s.data(), s.size());
  }

 private:
  std::vector<std::byte>& out_;
};

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail("GGUF alignment {} is not a non-zero power of two", alignment);
}

GgufWriter::Value GgufWriter::value(const std::string& key, GgufType type, GgufType array_type, uint64_t count) {
  Value v;
  v.key = key;
  v.type = type;
  v.array_type = array_type;
  v.count = count;
  return v;
}

void GgufWriter::set(Value v) {
  if (v.key == "general.alignment") fail("GGUF key 'general.alignment' is set through the writer's alignment");
  for (Value& old : values_) {
    if (old.key == v.key) {
      old = std::move(v);
      return;
    }
  }
  values_.push_back(std::move(v));
}

void GgufWriter::set_raw(const std::string& key, GgufType type, const void* p, size_t n) {
  Value v = value(key, type);
  v.raw.resize(n);
  std::memcpy(v.raw.data(), p, n);
  set(std::move(v));
}

void GgufWriter::set_u8(const std::string& key, uint8_t v) { set_raw(key, GgufType::U8, &v, sizeof v); }
void GgufWriter::set_i8(const std::string& key, int8_t v) { set_raw(key, GgufType::I8, &v, sizeof v); }
void GgufWriter::set_u16(const std::string& key, uint16_t v) { set_raw(key, GgufType::U16, &v, sizeof v); }
void GgufWriter::set_i16(const std::string& key, int16_t v) { set_raw(key, GgufType::I16, &v, sizeof v); }
void GgufWriter::set_u32(const std::string& key, uint32_t v) { set_raw(key, GgufType::U32, &v, sizeof v); }
void GgufWriter::set_i32(const std::string& key, int32_t v) { set_raw(key, GgufType::I32, &v, sizeof v); }
void GgufWriter::set_u64(const std::string& key, uint64_t v) { set_raw(key, GgufType::U64, &v, sizeof v); }
void GgufWriter::set_i64(const std::string& key, int64_t v) { set_raw(key, GgufType::I64, &v, sizeof v); }
void GgufWriter::set_f32(const std::string& key, float v) { set_raw(key, GgufType::F32, &v, sizeof v); }
void GgufWriter::set_f64(const std::string& key, double v) { set_raw(key, GgufType::F64, &v, sizeof v); }

void GgufWriter::set_bool(const std::string& key, bool v) {
  const uint8_t b = v ? 1 : 0;
  set_raw(key, GgufType::BOOL, &b, 1);
}

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  Value value_ = value(key, GgufType::STRING);
  value_.strings = {v};
  set(std::move(value_));
}

template <typename T>
void GgufWriter::set_array(const std::string& key, std::span<const T> values) {
  Value v = value(key, GgufType::ARRAY, gguf_type_of<T>(), values.size());
  v.raw.resize(values.size_bytes());
  if (!values.empty()) std::memcpy(v.raw.data(), values.data(), values.size_bytes());
  set(std::move(v));
}

template void GgufWriter::set_array<uint8_t>(const std::string&, std::span<const uint8_t>);
template void GgufWriter::set_array<int8_t>(const std::string&, std::span<const int8_t>);
template void GgufWriter::set_array<uint16_t>(const std::string&, std::span<const uint16_t>);
template void GgufWriter::set_array<int16_t>(const std::string&, std::span<const int16_t>);
template void GgufWriter::set_array<uint32_t>(const std::string&, std::span<const uint32_t>);
template void GgufWriter::set_array<int32_t>(const std::string&, std::span<const int32_t>);
template void GgufWriter::set_array<uint64_t>(const std::string&, std::span<const uint64_t>);
template void GgufWriter::set_array<int64_t>(const std::string&, std::span<const int64_t>);
template void GgufWriter::set_array<float>(const std::string&, std::span<const float>);
template void GgufWriter::set_array<double>(const std::string&, std::span<const double>);

void GgufWriter::set_bool_array(const std::string& key, const std::vector<bool>& values) {
  Value v = value(key, GgufType::ARRAY, GgufType::BOOL, values.size());
  for (bool b : values) v.raw.push_back(std::byte{b ? uint8_t{1} : uint8_t{0}});
  set(std::move(v));
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& values) {
  Value v = value(key, GgufType::ARRAY, GgufType::STRING, values.size());
  v.strings = values;
  set(std::move(v));
}

uint64_t GgufWriter::check_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims) const {
  for (const Tensor& t : tensors_)
    if (t.name == name) fail("GGUF tensor '{}' added twice", name);
  if (dims.size() > kGgufMaxDims)
    fail("GGUF tensor '{}': {} dimensions, more than {}", name, dims.size(), kGgufMaxDims);
  uint64_t numel = 1;
  for (int64_t d : dims) {
    if (d < 1 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
      fail("GGUF tensor '{}': a dimension is below 1 or the element count overflows", name);
  }
  const int64_t ne0 = dims.empty() ? 1 : dims[0];
  if (ne0 % ggml_block_size(type) != 0)
    fail("GGUF tensor '{}': dimension 0 ({}) is not a multiple of the {} block size {}", name, ne0,
         ggml_type_name(type), ggml_block_size(type));
  const auto nbytes = ggml_row_bytes(type, numel);
  if (!nbytes) fail("GGUF tensor '{}': byte count overflows", name);
  return *nbytes;
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                            std::vector<std::byte> bytes) {
  const uint64_t need = check_tensor(name, type, dims);
  if (bytes.size() != need)
    fail("GGUF tensor '{}': {} bytes given but dims of {} need {}", name, bytes.size(), ggml_type_name(type), need);
  auto data = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  add_tensor(name, type, std::move(dims), [data](int64_t r0, int64_t r1, std::span<std::byte> out) {
    const size_t row_bytes = out.size() / static_cast<size_t>(r1 - r0);
    std::memcpy(out.data(), data->data() + static_cast<size_t>(r0) * row_bytes, out.size());
  });
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims, Fill fill) {
  const uint64_t nbytes = check_tensor(name, type, dims);
  if (!fill) fail("GGUF tensor '{}' has no fill function", name);
  const uint64_t offset = round_up(data_size_, alignment_);
  tensors_.push_back({name, type, std::move(dims), nbytes, offset, std::move(fill)});
  data_size_ = offset + nbytes;
}

std::vector<std::byte> GgufWriter::header() const {
  std::vector<std::byte> out;
  Buffer b(out);
  b.raw("GGUF", 4);
  b.put<uint32_t>(3);
  b.put<uint64_t>(tensors_.size());
  const bool write_alignment = alignment_ != kGgufDefaultAlignment;
  b.put<uint64_t>(values_.size() + (write_alignment ? 1 : 0));
  if (write_alignment) {
    b.str("general.alignment");
    b.put<uint32_t>(static_cast<uint32_t>(GgufType::U32));
    b.put<uint32_t>(alignment_);
  }
  for (const Value& v : values_) {
    b.str(v.key);
    b.put<uint32_t>(static_cast<uint32_t>(v.type));
    if (v.type == GgufType::ARRAY) {
      b.put<uint32_t>(static_cast<uint32_t>(v.array_type));
      b.put<uint64_t>(v.count);
    }
    for (const std::string& s : v.strings) b.str(s);
    b.raw(v.raw.data(), v.raw.size());
  }
  for (const Tensor& t : tensors_) {
    b.str(t.name);
    b.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) b.put<uint64_t>(static_cast<uint64_t>(d));
    b.put<uint32_t>(static_cast<uint32_t>(t.type));
    b.put<uint64_t>(t.offset);
  }
  out.resize(round_up(out.size(), alignment_), std::byte{0});
  return out;
}

void GgufWriter::emit(const std::function<void(const void*, size_t)>& out, size_t chunk_bytes) const {
  const std::vector<std::byte> head = header();
  out(head.data(), head.size());
  const std::vector<std::byte> zeros(alignment_, std::byte{0});
  uint64_t pos = 0;  // within the data region
  std::vector<std::byte> buffer;
  for (const Tensor& t : tensors_) {
    out(zeros.data(), static_cast<size_t>(t.offset - pos));
    int64_t rows = 1;
    for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
    const uint64_t row_bytes = t.nbytes / static_cast<uint64_t>(rows);
    const auto per_chunk = static_cast<int64_t>(std::clamp<uint64_t>(chunk_bytes / row_bytes, 1, rows));
    buffer.resize(static_cast<size_t>(per_chunk * row_bytes));
    for (int64_t r0 = 0; r0 < rows; r0 += per_chunk) {
      const int64_t r1 = std::min(rows, r0 + per_chunk);
      const std::span<std::byte> chunk(buffer.data(), static_cast<size_t>(r1 - r0) * row_bytes);
      t.fill(r0, r1, chunk);
      out(chunk.data(), chunk.size());
    }
    pos = t.offset + t.nbytes;
  }
  // The data region ends aligned too, as ggml's writer leaves it.
  out(zeros.data(), static_cast<size_t>(round_up(pos, alignment_) - pos));
}

std::vector<std::byte> GgufWriter::bytes() const {
  std::vector<std::byte> all;
  emit([&](const void* p, size_t n) { Buffer(all).raw(p, n); }, 1u << 20);
  return all;
}

void GgufWriter::write(const std::string& path, size_t chunk_bytes) const {
  TempFile file(path);
  emit([&](const void* p, size_t n) { file.write(p, n); }, chunk_bytes);
  file.commit();
}

bool GgufWriter::remove_key(const std::string& key) {
  const auto it = std::find_if(values_.begin(), values_.end(), [&](const Value& v) { return v.key == key; });
  if (it == values_.end()) return false;
  values_.erase(it);
  return true;
}

bool GgufWriter::remove_tensor(const std::string& name) {
  const auto it = std::find_if(tensors_.begin(), tensors_.end(), [&](const Tensor& t) { return t.name == name; });
  if (it == tensors_.end()) return false;
  tensors_.erase(it);
  data_size_ = 0;  // lay the remaining tensors out again
  for (Tensor& t : tensors_) {
    t.offset = round_up(data_size_, alignment_);
    data_size_ = t.offset + t.nbytes;
  }
  return true;
}

}  // namespace specula
