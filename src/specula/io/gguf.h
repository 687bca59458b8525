#pragma once
// GGUF reading (versions 2 and 3, zero copy over mmap).
//
// File layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count; the
// metadata key/value pairs (key string, u32 value type, value); the tensor infos (name string,
// u32 n_dims, u64 dims[n_dims] with ne0 first, u32 ggml type, u64 offset); padding to the
// alignment (`general.alignment`, default 32); then the data region, which tensor offsets are
// relative to. A string is a u64 byte length and the bytes (no terminator); an array is a u32
// element type, a u64 count and the elements.
// Everything is validated at open (see GgufFile::open) so later code can trust the views.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "specula/util/mapped_file.h"

namespace specula {

// Tensor element types, with ggml's ids (ggml.h: new types are only appended; the gaps are ids
// ggml retired).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

// Storage of one ggml type: `block_size` elements are stored in `type_size` bytes.
struct GgmlTypeTraits {
  GgmlType type;
  const char* name;     // ggml's spelling: "f32", "q4_0", "q6_K", ...
  uint32_t block_size;  // elements per block
  uint32_t type_size;   // bytes per block
};

// nullptr for an id ggml does not define (or no longer allows in files).
const GgmlTypeTraits* ggml_type_traits(uint32_t id);
// Traits of a known type (throws specula::Error for a value outside the enum).
const GgmlTypeTraits& ggml_traits(GgmlType t);
std::string_view ggml_type_name(GgmlType t);
inline uint32_t ggml_block_size(GgmlType t) { return ggml_traits(t).block_size; }
inline uint32_t ggml_type_size(GgmlType t) { return ggml_traits(t).type_size; }
// Bytes of n elements (n a multiple of the block size); nullopt when n is not, or on overflow.
std::optional<uint64_t> ggml_row_bytes(GgmlType t, uint64_t n);

// Metadata value types (GGUF spec ids).
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
inline constexpr uint32_t kGgufTypeCount = 13;
std::string_view gguf_type_name(GgufType t);  // "u32", "string", "array", ...
// Bytes of one value of a fixed-size type; 0 for STRING and ARRAY.
size_t gguf_type_size(GgufType t);

// One metadata key/value pair; views point into the file's bytes (valid while the GgufFile lives).
struct GgufKv {
  std::string_view key;
  GgufType type = GgufType::U8;
  GgufType array_type = GgufType::U8;     // element type when type == ARRAY
  uint64_t count = 1;                     // elements: 1 for a scalar, the length of an array
  const std::byte* data = nullptr;        // fixed-size values: count little-endian elements (unaligned)
  std::vector<std::string_view> strings;  // STRING: the value; ARRAY of STRING: every element

  bool is_array() const { return type == GgufType::ARRAY; }
  // "u32", "string", "array of f32" (for messages).
  std::string type_str() const;
};

// One tensor of a GGUF file. `data` points into the file's bytes (valid while the GgufFile lives).
// dims are in GGUF order: dims[0] (ne0) varies fastest, so a row-major [out, in] matrix has
// dims {in, out}; a row is dims[0] elements.
struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> dims;
  uint64_t offset = 0;  // from the start of the data region
  uint64_t nbytes = 0;
  const std::byte* data = nullptr;

  int64_t numel() const;
  int64_t ne0() const { return dims.empty() ? 1 : dims[0]; }
  int64_t rows() const { return numel() / ne0(); }
  uint64_t row_bytes() const { return nbytes / static_cast<uint64_t>(rows()); }
  std::string dims_str() const;  // "[2560, 262144]" (ne0 first)
};

inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxDims = 4;

class GgufFile {
 public:
  // Maps and validates the file: magic, version 2 or 3, every count and length against the bytes
  // left (before anything is allocated for it), known value types, bools 0 or 1, unique keys and
  // tensor names, `general.alignment` a u32 power of two, tensor dims (at most 4, each >= 1, ne0 a
  // multiple of the type's block size, element and byte counts free of overflow), known ggml
  // types, offsets aligned and inside the data region, no two tensors overlapping. Throws
  // specula::Error naming the file (and the key or tensor at fault).
  static GgufFile open(const std::string& path);
  // The same over bytes the caller keeps alive as long as the GgufFile (tests, fuzzing).
  // `name` stands for the path in messages.
  static GgufFile from_bytes(std::span<const std::byte> bytes, std::string name = "<memory>");

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data region
  size_t file_size() const { return size_; }
  const MappedFile& mapping() const { return file_; }  // empty for from_bytes

  // Metadata in file order.
  const std::vector<GgufKv>& metadata() const { return kvs_; }
  const GgufKv* find_kv(std::string_view key) const;  // nullptr if absent
  bool has(std::string_view key) const { return find_kv(key) != nullptr; }

  // Typed getters: the get_ forms throw naming the key when it is missing, and every form throws
  // naming the key and both types when the value has another type (no conversions, except get_int
  // and get_int_array, which take any integer type and check the value fits).
  std::string_view get_string(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int32_t get_i32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::span<const std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;

  // nullopt when the key is absent.
  std::optional<std::string_view> find_string(std::string_view key) const;
  std::optional<uint32_t> find_u32(std::string_view key) const;
  std::optional<int32_t> find_i32(std::string_view key) const;
  std::optional<uint64_t> find_u64(std::string_view key) const;
  std::optional<int64_t> find_int(std::string_view key) const;
  std::optional<float> find_f32(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  std::optional<std::span<const std::string_view>> find_string_array(std::string_view key) const;
  std::optional<std::vector<float>> find_f32_array(std::string_view key) const;
  std::optional<std::vector<int32_t>> find_i32_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> find_int_array(std::string_view key) const;

  // Tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;  // nullptr if absent
  const GgufTensor& tensor(std::string_view name) const;       // throws naming the tensor and file

 private:
  static GgufFile parse(GgufFile f);
  const GgufKv& expect(std::string_view key, GgufType type) const;
  const GgufKv& expect_array(std::string_view key, GgufType elem) const;
  const GgufKv& expect_int(std::string_view key) const;
  const GgufKv& expect_int_array(std::string_view key) const;

  MappedFile file_;
  std::string path_;
  const std::byte* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::map<std::string_view, size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// A metadata value for display: `"gemma4"`, `2560`, `[1, 2, 3, ... (262144 elements)]`.
std::string gguf_value_string(const GgufKv& kv, size_t max_elements = 8);

}  // namespace specula
