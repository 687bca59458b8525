#pragma once
// GGUF v3 writing: metadata of every value type, tensors of any ggml type from raw bytes or a fill
// callback, each tensor's data aligned (see gguf.h for the layout).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "specula/io/gguf.h"

namespace specula {

class GgufWriter {
 public:
  // Fills rows [row_begin, row_end) of a tensor into `out` (a row is dims[0] elements; out holds
  // exactly (row_end - row_begin) * row_bytes bytes).
  using Fill = std::function<void(int64_t row_begin, int64_t row_end, std::span<std::byte> out)>;

  // `alignment` (a power of two) places each tensor's data; other than the default 32 it is
  // written as `general.alignment`, which must not be set as a key.
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

  // Setting a key that is already set replaces its value (it keeps its place).
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);

  // Arrays; T is one of uint8_t int8_t uint16_t int16_t uint32_t int32_t uint64_t int64_t float double.
  template <typename T>
  void set_array(const std::string& key, std::span<const T> values);
  template <typename T>
  void set_array(const std::string& key, const std::vector<T>& values) {
    set_array(key, std::span<const T>(values));
  }
  void set_bool_array(const std::string& key, const std::vector<bool>& values);
  void set_string_array(const std::string& key, const std::vector<std::string>& values);

  // Tensors are written in the order added. dims in GGUF order (ne0 first); dims[0] must be a
  // multiple of the type's block size; `bytes` must hold exactly the tensor's byte size.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims, std::vector<std::byte> bytes);
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims, Fill fill);

  // Drops a key or a tensor (later tensors move up); false when there was none of that name.
  bool remove_key(const std::string& key);
  bool remove_tensor(const std::string& name);

  // The whole file in memory (small files: tests, fuzz seeds).
  std::vector<std::byte> bytes() const;
  // Writes atomically (to path + ".tmp", then rename), tensor data in chunks of about
  // `chunk_bytes`. Throws specula::Error on I/O failure.
  void write(const std::string& path, size_t chunk_bytes = 64u << 20) const;

 private:
  struct Value {
    std::string key;
    GgufType type = GgufType::U8;
    GgufType array_type = GgufType::U8;
    uint64_t count = 1;
    std::vector<std::byte> raw;        // fixed-size elements, little-endian
    std::vector<std::string> strings;  // STRING values
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    uint64_t nbytes;
    uint64_t offset;
    Fill fill;
  };

  static Value value(const std::string& key, GgufType type, GgufType array_type = GgufType::U8, uint64_t count = 1);
  void set(Value v);
  uint64_t check_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims) const;
  void set_raw(const std::string& key, GgufType type, const void* p, size_t n);
  std::vector<std::byte> header() const;  // everything before the data region, padding included
  void emit(const std::function<void(const void*, size_t)>& out, size_t chunk_bytes) const;

  uint32_t alignment_;
  std::vector<Value> values_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace specula
