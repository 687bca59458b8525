#include "specula/io/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include "specula/io/byte_ranges.h"
#include "specula/util/error.h"
#include "specula/util/printable.h"

namespace specula {

static_assert(std::endian::native == std::endian::little, "GGUF values are read in place as little-endian");

namespace {

// Sizes from ggml-common.h's block structs (QK_K = 256 for the K, IQ and TQ families).
constexpr GgmlTypeTraits kTraits[] = {
    {GgmlType::F32, "f32", 1, 4},
    {GgmlType::F16, "f16", 1, 2},
    {GgmlType::Q4_0, "q4_0", 32, 18},
    {GgmlType::Q4_1, "q4_1", 32, 20},
    {GgmlType::Q5_0, "q5_0", 32, 22},
    {GgmlType::Q5_1, "q5_1", 32, 24},
    {GgmlType::Q8_0, "q8_0", 32, 34},
    {GgmlType::Q8_1, "q8_1", 32, 36},
    {GgmlType::Q2_K, "q2_K", 256, 84},
    {GgmlType::Q3_K, "q3_K", 256, 110},
    {GgmlType::Q4_K, "q4_K", 256, 144},
    {GgmlType::Q5_K, "q5_K", 256, 176},
    {GgmlType::Q6_K, "q6_K", 256, 210},
    {GgmlType::Q8_K, "q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "iq2_xxs", 256, 66},
    {GgmlType::IQ2_XS, "iq2_xs", 256, 74},
    {GgmlType::IQ3_XXS, "iq3_xxs", 256, 98},
    {GgmlType::IQ1_S, "iq1_s", 256, 50},
    {GgmlType::IQ4_NL, "iq4_nl", 32, 18},
    {GgmlType::IQ3_S, "iq3_s", 256, 110},
    {GgmlType::IQ2_S, "iq2_s", 256, 82},
    {GgmlType::IQ4_XS, "iq4_xs", 256, 136},
    {GgmlType::I8, "i8", 1, 1},
    {GgmlType::I16, "i16", 1, 2},
    {GgmlType::I32, "i32", 1, 4},
    {GgmlType::I64, "i64", 1, 8},
    {GgmlType::F64, "f64", 1, 8},
    {GgmlType::IQ1_M, "iq1_m", 256, 56},
    {GgmlType::BF16, "bf16", 1, 2},
    {GgmlType::TQ1_0, "tq1_0", 256, 54},
    {GgmlType::TQ2_0, "tq2_0", 256, 66},
    {GgmlType::MXFP4, "mxfp4", 32, 17},
    {GgmlType::NVFP4, "nvfp4", 64, 36},
    {GgmlType::Q1_0, "q1_0", 128, 18},
};

constexpr const char* kGgufTypeNames[kGgufTypeCount] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                        "bool", "string", "array", "u64", "i64", "f64"};

// Smallest encoding of one value: what a count is checked against before anything is reserved.
uint64_t min_value_bytes(GgufType t) {
  if (t == GgufType::STRING) return 8;     // the length field
  if (t == GgufType::ARRAY) return 4 + 8;  // element type and count
  return gguf_type_size(t);
}

// A bounds-checked cursor over the header.
class Cursor {
 public:
  Cursor(const std::string& path, const std::byte* base, uint64_t size) : path_(path), base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  const std::byte* take(uint64_t n, std::string_view what) {
    if (n > left()) fail("{}: truncated: {} at offset {} needs {} bytes but {} are left", path_, what, pos_, n, left());
    const std::byte* p = base_ + pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T read(std::string_view what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }

  // `element`: the index within a string array, for messages (formatted only on failure: a
  // vocabulary has hundreds of thousands).
  std::string_view string(std::string_view what, std::optional<uint64_t> element = std::nullopt) {
    const uint64_t at = pos_;
    const auto name = [&] { return element ? fmt::format("{} element {}", what, *element) : std::string(what); };
    if (left() < 8) fail("{}: truncated: {} at offset {} needs 8 bytes but {} are left", path_, name(), at, left());
    const auto len = read<uint64_t>(what);
    if (len > left())
      fail("{}: truncated: {} at offset {} has string length {} but {} bytes are left", path_, name(), at, len, left());
    return {reinterpret_cast<const char*>(take(len, what)), static_cast<size_t>(len)};
  }

 private:
  const std::string& path_;
  const std::byte* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64: return true;
    default: return false;
  }
}

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element i of an integer-typed value; nullopt when it does not fit in int64_t (a large u64).
std::optional<int64_t> load_int(GgufType t, const std::byte* p, uint64_t i) {
  switch (t) {
    case GgufType::U8: return load<uint8_t>(p + i);
    case GgufType::I8: return load<int8_t>(p + i);
    case GgufType::U16: return load<uint16_t>(p + 2 * i);
    case GgufType::I16: return load<int16_t>(p + 2 * i);
    case GgufType::U32: return load<uint32_t>(p + 4 * i);
    case GgufType::I32: return load<int32_t>(p + 4 * i);
    case GgufType::I64: return load<int64_t>(p + 8 * i);
    case GgufType::U64: {
      const auto v = load<uint64_t>(p + 8 * i);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    default: return std::nullopt;
  }
}

// One element of a fixed-size value as text.
std::string element_string(GgufType t, const std::byte* p, uint64_t i) {
  switch (t) {
    case GgufType::F32: return fmt::format("{}", load<float>(p + 4 * i));
    case GgufType::F64: return fmt::format("{}", load<double>(p + 8 * i));
    case GgufType::BOOL: return load<uint8_t>(p + i) ? "true" : "false";
    case GgufType::U64: return std::to_string(load<uint64_t>(p + 8 * i));
    default: return std::to_string(load_int(t, p, i).value_or(0));
  }
}

std::string quoted(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out(1, '"');
  out += printable_name(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  out += '"';
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Types

const GgmlTypeTraits* ggml_type_traits(uint32_t id) {
  for (const GgmlTypeTraits& t : kTraits)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const GgmlTypeTraits& ggml_traits(GgmlType t) {
  const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(t));
  if (!traits) fail("unknown ggml type {}", static_cast<uint32_t>(t));
  return *traits;
}

std::string_view ggml_type_name(GgmlType t) { return ggml_traits(t).name; }

std::optional<uint64_t> ggml_row_bytes(GgmlType t, uint64_t n) {
  const GgmlTypeTraits& traits = ggml_traits(t);
  if (n % traits.block_size != 0) return std::nullopt;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n / traits.block_size, uint64_t{traits.type_size}, &bytes)) return std::nullopt;
  return bytes;
}

std::string_view gguf_type_name(GgufType t) {
  const auto id = static_cast<uint32_t>(t);
  return id < kGgufTypeCount ? kGgufTypeNames[id] : "unknown";
}

size_t gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    default: return 0;
  }
}

std::string GgufKv::type_str() const {
  if (!is_array()) return std::string(gguf_type_name(type));
  return "array of " + std::string(gguf_type_name(array_type));
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string GgufTensor::dims_str() const { return dims_string(dims); }

// ---------------------------------------------------------------------------------------------
// Reading

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  f.file_ = MappedFile::open(path);
  f.base_ = f.file_.data();
  f.size_ = f.file_.size();
  return parse(std::move(f));
}

GgufFile GgufFile::from_bytes(std::span<const std::byte> bytes, std::string name) {
  GgufFile f;
  f.path_ = std::move(name);
  f.base_ = bytes.data();
  f.size_ = bytes.size();
  return parse(std::move(f));
}

GgufFile GgufFile::parse(GgufFile f) {
  const std::string& path = f.path_;
  Cursor in(path, f.base_, f.size_);

  if (f.size_ < 4) fail("{}: truncated: {} bytes, too short for the GGUF magic", path, f.size_);
  const std::string_view magic(reinterpret_cast<const char*>(f.base_), 4);
  if (magic != "GGUF") fail("{}: not a GGUF file (magic is {}, expected \"GGUF\")", path, quoted(magic));
  in.take(4, "magic");
  f.version_ = in.read<uint32_t>("version");
  if (f.version_ != 2 && f.version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(f.version_);
    if (swapped == 2 || swapped == 3) fail("{}: big-endian GGUF (version {}) is not supported", path, swapped);
    fail("{}: GGUF version {} is not supported (only 2 and 3)", path, f.version_);
  }
  const auto n_tensors = in.read<uint64_t>("tensor count");
  const auto n_kvs = in.read<uint64_t>("metadata count");
  // The smallest pair is an empty key, a type and a u8; the smallest tensor info an empty name,
  // n_dims 0, a type and an offset.
  constexpr uint64_t kMinKv = 8 + 4 + 1, kMinTensor = 8 + 4 + 4 + 8;
  if (n_kvs > in.left() / kMinKv)
    fail("{}: metadata count {} cannot fit in the {} bytes left (each pair needs at least {})", path, n_kvs, in.left(),
         kMinKv);
  if (n_tensors > (in.left() - n_kvs * kMinKv) / kMinTensor)
    fail("{}: tensor count {} cannot fit in the {} bytes left (each tensor info needs at least {})", path, n_tensors,
         in.left() - n_kvs * kMinKv, kMinTensor);

  f.kvs_.reserve(n_kvs);
  for (uint64_t i = 0; i < n_kvs; ++i) {
    GgufKv kv;
    kv.key = in.string(fmt::format("metadata key {}", i));
    const std::string what = fmt::format("metadata key '{}'", printable_name(kv.key));
    const auto bad = [&](const std::string& why) { fail("{}: {}: {}", path, what, why); };
    if (f.kv_index_.count(kv.key)) bad("appears twice");

    const auto type_id = in.read<uint32_t>(what + " value type");
    if (type_id >= kGgufTypeCount) bad(fmt::format("unknown value type {}", type_id));
    kv.type = static_cast<GgufType>(type_id);
    GgufType elem = kv.type;
    if (kv.type == GgufType::ARRAY) {
      const auto elem_id = in.read<uint32_t>(what + " array element type");
      if (elem_id >= kGgufTypeCount) bad(fmt::format("unknown array element type {}", elem_id));
      elem = kv.array_type = static_cast<GgufType>(elem_id);
      if (elem == GgufType::ARRAY) bad("arrays of arrays are not supported");
      kv.count = in.read<uint64_t>(what + " array length");
      if (kv.count > in.left() / min_value_bytes(elem))
        bad(fmt::format("array of {} {} elements cannot fit in the {} bytes left", kv.count, gguf_type_name(elem),
                        in.left()));
    }
    if (elem == GgufType::STRING) {
      kv.strings.reserve(kv.count);
      for (uint64_t j = 0; j < kv.count; ++j)
        kv.strings.push_back(kv.is_array() ? in.string(what, j) : in.string(what));
    } else {
      // count * size <= left was checked above for arrays.
      kv.data = in.take(kv.count * gguf_type_size(elem), what + " value");
      if (elem == GgufType::BOOL) {
        for (uint64_t j = 0; j < kv.count; ++j) {
          const auto b = std::to_integer<unsigned>(kv.data[j]);
          if (b > 1) bad(fmt::format("bool value {} is not 0 or 1", b));
        }
      }
    }
    f.kv_index_.emplace(kv.key, f.kvs_.size());
    f.kvs_.push_back(std::move(kv));
  }

  if (const GgufKv* kv = f.find_kv("general.alignment")) {
    if (kv->type != GgufType::U32)
      fail("{}: metadata key 'general.alignment' is {}, expected u32", path, kv->type_str());
    const auto a = load<uint32_t>(kv->data);
    if (a == 0 || (a & (a - 1)) != 0)
      fail("{}: metadata key 'general.alignment' = {} is not a non-zero power of two", path, a);
    f.alignment_ = a;
  }

  f.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = std::string(in.string(fmt::format("tensor name {}", i)));
    const std::string what = fmt::format("tensor '{}'", printable_name(t.name));
    const auto bad = [&](const std::string& why) { fail("{}: {}: {}", path, what, why); };
    if (f.tensor_index_.count(t.name)) bad("name appears twice");

    const auto n_dims = in.read<uint32_t>(what + " n_dims");
    if (n_dims > kGgufMaxDims) bad(fmt::format("{} dimensions, more than the {} GGUF allows", n_dims, kGgufMaxDims));
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto dim = in.read<uint64_t>(fmt::format("{} dimension {}", what, d));
      if (dim == 0) bad(fmt::format("dimension {} is 0", d));
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad(fmt::format("dimension {} = {} is too large", d, dim));
      t.dims.push_back(static_cast<int64_t>(dim));
      if (__builtin_mul_overflow(numel, dim, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        numel = 0;  // reported below, once the dims are known
    }
    const auto type_id = in.read<uint32_t>(what + " type");
    t.offset = in.read<uint64_t>(what + " offset");
    if (numel == 0) bad(fmt::format("dims {} overflow a 64-bit element count", dims_string(t.dims)));
    const GgmlTypeTraits* traits = ggml_type_traits(type_id);
    if (!traits) bad(fmt::format("unknown ggml type {}", type_id));
    t.type = traits->type;
    if (t.ne0() % traits->block_size != 0)
      bad(fmt::format("dimension 0 ({}) is not a multiple of the {} block size {}", t.ne0(), traits->name,
                      traits->block_size));
    const auto nbytes = ggml_row_bytes(t.type, numel);
    if (!nbytes) bad(fmt::format("dims {} of {} overflow a 64-bit byte count", dims_string(t.dims), traits->name));
    t.nbytes = *nbytes;
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  // The data region starts at the end of the header rounded up to the alignment.
  const uint64_t header_end = in.pos();
  f.data_offset_ = (header_end + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  const uint64_t data_size = f.data_offset_ < f.size_ ? f.size_ - f.data_offset_ : 0;
  std::vector<ByteRange> ranges;
  ranges.reserve(f.tensors_.size());
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    GgufTensor& t = f.tensors_[i];
    if (t.offset % f.alignment_ != 0)
      fail("{}: tensor '{}': offset {} is not a multiple of the alignment {}", path, printable_name(t.name), t.offset,
           f.alignment_);
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail("{}: tensor '{}': data [{}, {}) runs past the end of the data region ({} bytes from file offset {})", path,
           printable_name(t.name), t.offset, t.offset + std::min(t.nbytes, ~uint64_t{0} - t.offset), data_size,
           f.data_offset_);
    t.data = f.base_ + f.data_offset_ + t.offset;
    ranges.push_back({t.offset, t.offset + t.nbytes, i});
  }
  if (const auto overlap = first_overlap(ranges)) {
    const auto& [ra, rb] = *overlap;
    fail("{}: tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", path, printable_name(f.tensors_[ra.index].name),
         ra.begin, ra.end, printable_name(f.tensors_[rb.index].name), rb.begin, rb.end);
  }
  return f;
}

const GgufKv* GgufFile::find_kv(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (!t) fail("{}: tensor '{}' not found", path_, printable_name(name));
  return *t;
}

// ---------------------------------------------------------------------------------------------
// Metadata getters

const GgufKv& GgufFile::expect(std::string_view key, GgufType type) const {
  const GgufKv* kv = find_kv(key);
  if (!kv) fail("{}: metadata key '{}' is missing", path_, printable_name(key));
  if (kv->type != type)
    fail("{}: metadata key '{}' is {}, expected {}", path_, printable_name(key), kv->type_str(), gguf_type_name(type));
  return *kv;
}

const GgufKv& GgufFile::expect_array(std::string_view key, GgufType elem) const {
  const GgufKv* kv = find_kv(key);
  if (!kv) fail("{}: metadata key '{}' is missing", path_, printable_name(key));
  if (!kv->is_array() || kv->array_type != elem)
    fail("{}: metadata key '{}' is {}, expected array of {}", path_, printable_name(key), kv->type_str(),
         gguf_type_name(elem));
  return *kv;
}

const GgufKv& GgufFile::expect_int(std::string_view key) const {
  const GgufKv* kv = find_kv(key);
  if (!kv) fail("{}: metadata key '{}' is missing", path_, printable_name(key));
  if (!is_integer(kv->type))
    fail("{}: metadata key '{}' is {}, expected an integer", path_, printable_name(key), kv->type_str());
  return *kv;
}

const GgufKv& GgufFile::expect_int_array(std::string_view key) const {
  const GgufKv* kv = find_kv(key);
  if (!kv) fail("{}: metadata key '{}' is missing", path_, printable_name(key));
  if (!kv->is_array() || !is_integer(kv->array_type))
    fail("{}: metadata key '{}' is {}, expected an array of integers", path_, printable_name(key), kv->type_str());
  return *kv;
}

std::string_view GgufFile::get_string(std::string_view key) const { return expect(key, GgufType::STRING).strings[0]; }
uint32_t GgufFile::get_u32(std::string_view key) const { return load<uint32_t>(expect(key, GgufType::U32).data); }
int32_t GgufFile::get_i32(std::string_view key) const { return load<int32_t>(expect(key, GgufType::I32).data); }
uint64_t GgufFile::get_u64(std::string_view key) const { return load<uint64_t>(expect(key, GgufType::U64).data); }
float GgufFile::get_f32(std::string_view key) const { return load<float>(expect(key, GgufType::F32).data); }
bool GgufFile::get_bool(std::string_view key) const { return load<uint8_t>(expect(key, GgufType::BOOL).data) != 0; }

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufKv& kv = expect_int(key);
  const auto v = load_int(kv.type, kv.data, 0);
  if (!v) fail("{}: metadata key '{}' = {} does not fit in int64", path_, printable_name(key), load<uint64_t>(kv.data));
  return *v;
}

std::span<const std::string_view> GgufFile::get_string_array(std::string_view key) const {
  return expect_array(key, GgufType::STRING).strings;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufKv& kv = expect_array(key, GgufType::F32);
  std::vector<float> out(kv.count);
  if (kv.count) std::memcpy(out.data(), kv.data, kv.count * sizeof(float));
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const GgufKv& kv = expect_array(key, GgufType::I32);
  std::vector<int32_t> out(kv.count);
  if (kv.count) std::memcpy(out.data(), kv.data, kv.count * sizeof(int32_t));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufKv& kv = expect_int_array(key);
  std::vector<int64_t> out;
  out.reserve(kv.count);
  for (uint64_t i = 0; i < kv.count; ++i) {
    const auto v = load_int(kv.array_type, kv.data, i);
    if (!v)
      fail("{}: metadata key '{}' element {} = {} does not fit in int64", path_, printable_name(key), i,
           load<uint64_t>(kv.data + 8 * i));
    out.push_back(*v);
  }
  return out;
}

#define SPECULA_GGUF_FIND(Type, name)                                     \
  std::optional<Type> GgufFile::find_##name(std::string_view key) const { \
    if (!has(key)) return std::nullopt;                                   \
    return get_##name(key);                                               \
  }
SPECULA_GGUF_FIND(std::string_view, string)
SPECULA_GGUF_FIND(uint32_t, u32)
SPECULA_GGUF_FIND(int32_t, i32)
SPECULA_GGUF_FIND(uint64_t, u64)
SPECULA_GGUF_FIND(int64_t, int)
SPECULA_GGUF_FIND(float, f32)
SPECULA_GGUF_FIND(bool, bool)
SPECULA_GGUF_FIND(std::span<const std::string_view>, string_array)
SPECULA_GGUF_FIND(std::vector<float>, f32_array)
SPECULA_GGUF_FIND(std::vector<int32_t>, i32_array)
SPECULA_GGUF_FIND(std::vector<int64_t>, int_array)
#undef SPECULA_GGUF_FIND

std::string gguf_value_string(const GgufKv& kv, size_t max_elements) {
  const auto element = [&](uint64_t i) {
    const GgufType t = kv.is_array() ? kv.array_type : kv.type;
    return t == GgufType::STRING ? quoted(kv.strings[i]) : element_string(t, kv.data, i);
  };
  if (!kv.is_array()) return element(0);
  std::string out = "[";
  const uint64_t shown = std::min<uint64_t>(kv.count, max_elements);
  for (uint64_t i = 0; i < shown; ++i) out += (i ? ", " : "") + element(i);
  if (shown < kv.count) out += fmt::format("{}... ({} elements)", shown ? ", " : "", kv.count);
  return out + "]";
}

}  // namespace specula
