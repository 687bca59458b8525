// GGUF reader/writer: type tables, round trips of every metadata type and several tensors, and a
// hostile-file corpus (every malformed file must be rejected with specula::Error naming the
// problem, never a crash or a huge allocation).
#include "specula/io/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "error_of.h"
#include "specula/io/gguf_writer.h"
#include "specula/kernels/ggml_quants.h"
#include "specula/util/error.h"
#include "temp_dir.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using test::ScopedTempDir;

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string as_string(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

using test::error_of;
using test::pattern_bytes;

// The message of opening `bytes`, which must be rejected.
std::string open_error(const std::string& bytes) {
  return error_of([&] { GgufFile::from_bytes(as_bytes(bytes), "hostile.gguf"); });
}

// A raw GGUF file built field by field, for files the writer refuses to produce.
class Raw {
 public:
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& str(const std::string& s) {
    u64(s.size());
    bytes_ += s;
    return *this;
  }
  Raw& header(uint64_t n_tensors, uint64_t n_kvs, uint32_t version = 3) {
    bytes_ += "GGUF";
    return u32(version).u64(n_tensors).u64(n_kvs);
  }
  Raw& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  Raw& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Raw& pad(size_t alignment = 32) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, '\0');
    return *this;
  }
  Raw& data(size_t n) {
    bytes_.append(n, '\x11');
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  template <typename T>
  Raw& put(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  std::string bytes_;
};

// A file of one tensor 'w' (by default f32 [8] at offset 0) and `data` bytes of data.
std::string one_tensor_file(uint32_t type = 0, std::vector<uint64_t> dims = {8}, uint64_t offset = 0,
                            size_t data = 32) {
  Raw r;
  r.header(1, 0).tensor("w", std::move(dims), type, offset).pad().data(data);
  return r.bytes();
}

// ---------------------------------------------------------------------------------------------
// Types

TEST(GgufTypes, IdsAndSizesMatchGgml) {
  struct Row {
    GgmlType type;
    uint32_t id, block, size;
    const char* name;
  };
  const Row rows[] = {
      {GgmlType::F32, 0, 1, 4, "f32"},          {GgmlType::F16, 1, 1, 2, "f16"},
      {GgmlType::Q4_0, 2, 32, 18, "q4_0"},      {GgmlType::Q4_1, 3, 32, 20, "q4_1"},
      {GgmlType::Q5_0, 6, 32, 22, "q5_0"},      {GgmlType::Q5_1, 7, 32, 24, "q5_1"},
      {GgmlType::Q8_0, 8, 32, 34, "q8_0"},      {GgmlType::Q8_1, 9, 32, 36, "q8_1"},
      {GgmlType::Q2_K, 10, 256, 84, "q2_K"},    {GgmlType::Q3_K, 11, 256, 110, "q3_K"},
      {GgmlType::Q4_K, 12, 256, 144, "q4_K"},   {GgmlType::Q5_K, 13, 256, 176, "q5_K"},
      {GgmlType::Q6_K, 14, 256, 210, "q6_K"},   {GgmlType::Q8_K, 15, 256, 292, "q8_K"},
      {GgmlType::IQ4_NL, 20, 32, 18, "iq4_nl"}, {GgmlType::IQ4_XS, 23, 256, 136, "iq4_xs"},
      {GgmlType::I8, 24, 1, 1, "i8"},           {GgmlType::I16, 25, 1, 2, "i16"},
      {GgmlType::I32, 26, 1, 4, "i32"},         {GgmlType::I64, 27, 1, 8, "i64"},
      {GgmlType::F64, 28, 1, 8, "f64"},         {GgmlType::BF16, 30, 1, 2, "bf16"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const GgmlTypeTraits* t = ggml_type_traits(r.id);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, r.type);
    EXPECT_EQ(t->block_size, r.block);
    EXPECT_EQ(t->type_size, r.size);
    EXPECT_EQ(ggml_type_name(r.type), r.name);
  }
  // Retired or never-assigned ids.
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 1000u}) EXPECT_EQ(ggml_type_traits(id), nullptr) << id;
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_0, 48), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, std::numeric_limits<uint64_t>::max()), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q6_K, 512), 420u);
}

// ---------------------------------------------------------------------------------------------
// Round trips

GgufWriter every_type_writer(uint32_t alignment = kGgufDefaultAlignment) {
  GgufWriter w(alignment);
  w.set_string("general.architecture", "gemma4");
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", 18000000000000000000ull);
  w.set_i64("t.i64", -9000000000000000000ll);
  w.set_f32("t.f32", 0.15625f);
  w.set_f64("t.f64", -1e300);
  w.set_bool("t.bool", true);
  w.set_string("t.empty_string", "");
  w.set_string("t.string", std::string("caf\xc3\xa9\0x", 7));
  w.set_array<uint8_t>("t.a.u8", std::vector<uint8_t>{1, 2, 255});
  w.set_array<int8_t>("t.a.i8", std::vector<int8_t>{-1, 0, 127});
  w.set_array<uint16_t>("t.a.u16", std::vector<uint16_t>{1, 65535});
  w.set_array<int16_t>("t.a.i16", std::vector<int16_t>{-32768, 5});
  w.set_array<uint32_t>("t.a.u32", std::vector<uint32_t>{7, 8, 9});
  w.set_array<int32_t>("t.a.i32", std::vector<int32_t>{-7, 8, -9});
  w.set_array<uint64_t>("t.a.u64", std::vector<uint64_t>{1, 1ull << 40});
  w.set_array<int64_t>("t.a.i64", std::vector<int64_t>{-(1ll << 40), 3});
  w.set_array<float>("t.a.f32", std::vector<float>{0.5f, -2.0f, 1e-3f});
  w.set_array<double>("t.a.f64", std::vector<double>{0.25, 1e100});
  w.set_array<int32_t>("t.a.empty", std::vector<int32_t>{});
  w.set_bool_array("t.a.bool", {true, false, true});
  w.set_string_array("t.a.string", {"<pad>", "", "hello world"});
  return w;
}

struct TensorCase {
  std::string name;
  GgmlType type;
  std::vector<int64_t> dims;
};

const std::vector<TensorCase> kTensors = {
    {"token_embd.weight", GgmlType::Q4_0, {64, 3}},
    {"blk.0.attn_norm.weight", GgmlType::F32, {5}},
    {"blk.0.ffn_down.weight", GgmlType::Q6_K, {256, 2}},
    {"odd.i8", GgmlType::I8, {3}},
    {"blk.0.attn_q.weight", GgmlType::BF16, {4, 2, 3}},
    {"four_dims", GgmlType::F16, {2, 1, 3, 2}},
    {"iq", GgmlType::IQ2_XXS, {256}},  // parsed even though specula cannot dequantize it
};

std::vector<std::vector<std::byte>> add_tensors(GgufWriter& w) {
  std::vector<std::vector<std::byte>> data;
  unsigned seed = 0;
  for (const TensorCase& t : kTensors) {
    uint64_t numel = 1;
    for (int64_t d : t.dims) numel *= static_cast<uint64_t>(d);
    data.push_back(pattern_bytes(*ggml_row_bytes(t.type, numel), ++seed));
    w.add_tensor(t.name, t.type, t.dims, data.back());
  }
  return data;
}

void check_every_type(const GgufFile& f) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "gemma4");
  const GgufKv* u8 = f.find_kv("t.u8");
  ASSERT_NE(u8, nullptr);
  EXPECT_EQ(u8->type, GgufType::U8);
  EXPECT_EQ(f.get_int("t.u8"), 200);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_int("t.u16"), 60000);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(f.get_i32("t.i32"), -2000000000);
  EXPECT_EQ(f.get_u64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.get_int("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get_f32("t.f32"), 0.15625f);
  EXPECT_EQ(f.find_kv("t.f64")->type, GgufType::F64);
  double f64;
  std::memcpy(&f64, f.find_kv("t.f64")->data, 8);
  EXPECT_EQ(f64, -1e300);
  EXPECT_TRUE(f.get_bool("t.bool"));
  EXPECT_EQ(f.get_string("t.empty_string"), "");
  EXPECT_EQ(f.get_string("t.string"), std::string_view("caf\xc3\xa9\0x", 7));

  EXPECT_EQ(f.get_int_array("t.a.u8"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(f.get_int_array("t.a.i8"), (std::vector<int64_t>{-1, 0, 127}));
  EXPECT_EQ(f.get_int_array("t.a.u16"), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(f.get_int_array("t.a.i16"), (std::vector<int64_t>{-32768, 5}));
  EXPECT_EQ(f.get_int_array("t.a.u32"), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(f.get_i32_array("t.a.i32"), (std::vector<int32_t>{-7, 8, -9}));
  EXPECT_EQ(f.get_int_array("t.a.u64"), (std::vector<int64_t>{1, 1ll << 40}));
  EXPECT_EQ(f.get_int_array("t.a.i64"), (std::vector<int64_t>{-(1ll << 40), 3}));
  EXPECT_EQ(f.get_f32_array("t.a.f32"), (std::vector<float>{0.5f, -2.0f, 1e-3f}));
  EXPECT_EQ(f.find_kv("t.a.f64")->array_type, GgufType::F64);
  EXPECT_EQ(f.find_kv("t.a.f64")->count, 2u);
  EXPECT_TRUE(f.get_i32_array("t.a.empty").empty());
  const GgufKv* bools = f.find_kv("t.a.bool");
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->type_str(), "array of bool");
  EXPECT_EQ(gguf_value_string(*bools), "[true, false, true]");
  const auto strings = f.get_string_array("t.a.string");
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings[0], "<pad>");
  EXPECT_EQ(strings[1], "");
  EXPECT_EQ(strings[2], "hello world");

  // File order is kept.
  ASSERT_GE(f.metadata().size(), 2u);
  const size_t first = f.alignment() == kGgufDefaultAlignment ? 0 : 1;
  EXPECT_EQ(f.metadata()[first].key, "general.architecture");
  EXPECT_EQ(f.metadata()[first + 1].key, "t.u8");
}

void check_tensors(const GgufFile& f, const std::vector<std::vector<std::byte>>& data) {
  ASSERT_EQ(f.tensors().size(), kTensors.size());
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, kTensors[i].name);
    EXPECT_EQ(t.type, kTensors[i].type);
    EXPECT_EQ(t.dims, kTensors[i].dims);
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    EXPECT_EQ((f.data_offset() + t.offset) % f.alignment(), 0u);
    ASSERT_EQ(t.nbytes, data[i].size());
    EXPECT_EQ(std::memcmp(t.data, data[i].data(), t.nbytes), 0);
    EXPECT_EQ(&f.tensor(t.name), &t);
  }
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
  EXPECT_NE(error_of([&] { f.tensor("missing"); }).find("tensor 'missing' not found"), std::string::npos);
}

TEST(GgufRoundTrip, EveryMetadataTypeAndSeveralTensors) {
  GgufWriter w = every_type_writer();
  const auto data = add_tensors(w);
  const std::vector<std::byte> bytes = w.bytes();
  const GgufFile f = GgufFile::from_bytes(bytes, "mem.gguf");
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_FALSE(f.has("general.alignment"));  // the default is not written
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(bytes.size() % 32, 0u);
  check_every_type(f);
  check_tensors(f, data);

  const GgufTensor& q = f.tensor("blk.0.ffn_down.weight");
  EXPECT_EQ(q.numel(), 512);
  EXPECT_EQ(q.ne0(), 256);
  EXPECT_EQ(q.rows(), 2);
  EXPECT_EQ(q.row_bytes(), 210u);
  EXPECT_EQ(q.dims_str(), "[256, 2]");
}

TEST(GgufRoundTrip, FileOnDiskThroughOpen) {
  ScopedTempDir dir("specula-gguf");
  const std::string path = dir.file("model.gguf");
  GgufWriter w = every_type_writer();
  const auto data = add_tensors(w);
  w.write(path, 100);  // small chunks: several fill calls per tensor
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.file_size(), fs::file_size(path));
  EXPECT_EQ(f.mapping().size(), f.file_size());
  check_every_type(f);
  check_tensors(f, data);
  // A moved file keeps its views.
  const GgufFile moved = std::move(f);
  EXPECT_EQ(moved.get_string("general.architecture"), "gemma4");
  check_tensors(moved, data);
}

TEST(GgufRoundTrip, OtherAlignmentsAndVersion2) {
  for (uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    GgufWriter w = every_type_writer(alignment);
    const auto data = add_tensors(w);
    std::vector<std::byte> bytes = w.bytes();
    const GgufFile f = GgufFile::from_bytes(bytes);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.get_u32("general.alignment"), alignment);
    check_every_type(f);
    check_tensors(f, data);
    // Version 2 has the same layout.
    bytes[4] = std::byte{2};
    EXPECT_EQ(GgufFile::from_bytes(bytes).version(), 2u);
  }
}

TEST(GgufRoundTrip, StreamedFillMatchesBytes) {
  GgufWriter a, b;
  std::vector<float> values(64 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i));
  std::vector<std::byte> raw(values.size() * 4);
  std::memcpy(raw.data(), values.data(), raw.size());
  a.add_tensor("x", GgmlType::F32, {64, 5}, raw);
  int calls = 0;
  b.add_tensor("x", GgmlType::F32, {64, 5}, [&](int64_t r0, int64_t r1, std::span<std::byte> out) {
    ++calls;
    ASSERT_EQ(out.size(), static_cast<size_t>(r1 - r0) * 256);
    std::memcpy(out.data(), raw.data() + r0 * 256, out.size());
  });
  ScopedTempDir dir("specula-gguf");
  b.write(dir.file("x.gguf"), 512);  // two rows per chunk
  EXPECT_EQ(calls, 3);
  std::ifstream in(dir.file("x.gguf"), std::ios::binary);
  const std::string disk(std::istreambuf_iterator<char>(in), {});
  EXPECT_EQ(disk, as_string(a.bytes()));
}

TEST(GgufRoundTrip, ReplacingAKeyKeepsItsPlace) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_u32("b", 2);
  w.set_string("a", "now a string");
  const auto bytes = w.bytes();
  const GgufFile f = GgufFile::from_bytes(bytes);
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[0].key, "a");
  EXPECT_EQ(f.get_string("a"), "now a string");
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufMetadata, TypedGettersNameTheKeyAndBothTypes) {
  GgufWriter w = every_type_writer();
  const auto bytes = w.bytes();
  const GgufFile f = GgufFile::from_bytes(bytes, "m.gguf");
  auto expect_msg = [&](auto&& call, const std::string& phrase) {
    const std::string msg = error_of(call);
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_NE(msg.find("m.gguf"), std::string::npos) << msg;
  };
  expect_msg([&] { f.get_u32("t.i32"); }, "metadata key 't.i32' is i32, expected u32");
  expect_msg([&] { f.get_string("t.u32"); }, "metadata key 't.u32' is u32, expected string");
  expect_msg([&] { f.get_f32("t.f64"); }, "'t.f64' is f64, expected f32");
  expect_msg([&] { f.get_bool("t.u8"); }, "'t.u8' is u8, expected bool");
  expect_msg([&] { f.get_u64("t.i64"); }, "'t.i64' is i64, expected u64");
  expect_msg([&] { f.get_i32("t.a.i32"); }, "'t.a.i32' is array of i32, expected i32");
  expect_msg([&] { f.get_f32_array("t.a.f64"); }, "'t.a.f64' is array of f64, expected array of f32");
  expect_msg([&] { f.get_string_array("t.string"); }, "'t.string' is string, expected array of string");
  expect_msg([&] { f.get_i32_array("t.a.u32"); }, "is array of u32, expected array of i32");
  expect_msg([&] { f.get_int("t.f32"); }, "'t.f32' is f32, expected an integer");
  expect_msg([&] { f.get_int("t.u64"); }, "does not fit in int64");
  expect_msg([&] { f.get_int_array("t.a.f32"); }, "expected an array of integers");
  expect_msg([&] { f.get_u32("nope"); }, "metadata key 'nope' is missing");
  expect_msg([&] { f.get_string_array("nope"); }, "metadata key 'nope' is missing");

  EXPECT_EQ(f.find_u32("nope"), std::nullopt);
  EXPECT_EQ(f.find_string("nope"), std::nullopt);
  EXPECT_EQ(f.find_f32_array("nope"), std::nullopt);
  EXPECT_EQ(f.find_u32("t.u32"), 4000000000u);
  EXPECT_EQ(f.find_i32("t.i32"), -2000000000);
  EXPECT_EQ(f.find_u64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.find_int("t.i16"), -30000);
  EXPECT_EQ(f.find_f32("t.f32"), 0.15625f);
  EXPECT_EQ(f.find_bool("t.bool"), true);
  EXPECT_EQ(f.find_string("general.architecture"), "gemma4");
  EXPECT_EQ(f.find_string_array("t.a.string")->size(), 3u);
  EXPECT_EQ(f.find_i32_array("t.a.i32")->size(), 3u);
  EXPECT_EQ(f.find_int_array("t.a.u8")->size(), 3u);
  EXPECT_EQ(f.find_f32_array("t.a.f32")->size(), 3u);
  // Present with another type is an error, not "absent".
  expect_msg([&] { f.find_u32("t.i32"); }, "is i32, expected u32");
}

TEST(GgufMetadata, ValueStrings) {
  GgufWriter w = every_type_writer();
  std::vector<int32_t> many(100);
  for (int i = 0; i < 100; ++i) many[i] = i;
  w.set_array<int32_t>("many", many);
  const auto bytes = w.bytes();
  const GgufFile f = GgufFile::from_bytes(bytes);
  EXPECT_EQ(gguf_value_string(*f.find_kv("general.architecture")), "\"gemma4\"");
  EXPECT_EQ(gguf_value_string(*f.find_kv("t.u64")), "18000000000000000000");
  EXPECT_EQ(gguf_value_string(*f.find_kv("t.i8")), "-100");
  EXPECT_EQ(gguf_value_string(*f.find_kv("t.f32")), "0.15625");
  EXPECT_EQ(gguf_value_string(*f.find_kv("t.a.string")), "[\"<pad>\", \"\", \"hello world\"]");
  EXPECT_EQ(gguf_value_string(*f.find_kv("many"), 3), "[0, 1, 2, ... (100 elements)]");
  EXPECT_EQ(gguf_value_string(*f.find_kv("t.a.empty")), "[]");
  EXPECT_EQ(gguf_value_string(*f.find_kv("t.string")), "\"caf\xc3\xa9?x\"");  // the NUL shown as ?
}

TEST(GgufWriterErrors, RefusesBadTensorsAndKeys) {
  GgufWriter w;
  EXPECT_NE(error_of([&] {
              w.add_tensor("a", GgmlType::F32, {4}, pattern_bytes(15, 1));
            }).find("15 bytes given but dims of f32 need 16"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("a", GgmlType::Q4_0, {16}, pattern_bytes(9, 1));
            }).find("dimension 0 (16) is not a multiple of the q4_0 block size 32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("a", GgmlType::F32, {4, 0}, pattern_bytes(0, 1));
            }).find("below 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("a", GgmlType::F32, {1, 1, 1, 1, 1}, pattern_bytes(4, 1));
            }).find("5 dimensions"),
            std::string::npos);
  w.add_tensor("a", GgmlType::F32, {4}, pattern_bytes(16, 1));
  EXPECT_NE(error_of([&] { w.add_tensor("a", GgmlType::F32, {4}, pattern_bytes(16, 1)); }).find("added twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] { w.set_u32("general.alignment", 64); }).find("writer's alignment"), std::string::npos);
  EXPECT_NE(error_of([] { GgufWriter bad(48); }).find("48 is not a non-zero power of two"), std::string::npos);
  EXPECT_NE(error_of([] { GgufWriter bad(0); }).find("power of two"), std::string::npos);
  // What was accepted still writes a valid file.
  const auto bytes = w.bytes();
  EXPECT_EQ(GgufFile::from_bytes(bytes).tensors().size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Hostile files

void expect_rejected(const std::string& bytes, const std::string& phrase) {
  const std::string msg = open_error(bytes);
  EXPECT_NE(msg.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << msg;
  EXPECT_NE(msg.find("hostile.gguf"), std::string::npos) << msg;
}

TEST(GgufHostile, RawBuilderMakesValidFiles) {
  // The hostile cases below differ from these in one field each.
  const GgufFile f = GgufFile::from_bytes(as_bytes(one_tensor_file()));
  EXPECT_EQ(f.tensors().at(0).nbytes, 32u);
  Raw r;
  r.header(0, 1).kv_u32("general.alignment", 64);
  EXPECT_EQ(GgufFile::from_bytes(as_bytes(r.bytes())).alignment(), 64u);
}

TEST(GgufHostile, TruncatedAtEveryOffset) {
  GgufWriter w = every_type_writer();
  add_tensors(w);
  const std::vector<std::byte> full = w.bytes();
  const GgufFile f = GgufFile::from_bytes(full);
  uint64_t data_end = 0;
  for (const GgufTensor& t : f.tensors()) data_end = std::max(data_end, f.data_offset() + t.offset + t.nbytes);
  for (size_t n = 0; n < data_end; ++n) {
    // A copy of exactly n bytes, so ASan sees any read past the end.
    const std::string cut(reinterpret_cast<const char*>(full.data()), n);
    const std::string msg = open_error(cut);
    // Counts are checked against the bytes left before the fields they count are read.
    EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("past the end") != std::string::npos ||
                msg.find("cannot fit") != std::string::npos)
        << "cut at " << n << ": " << msg;
  }
  // The trailing padding after the last tensor is optional.
  const std::string cut(reinterpret_cast<const char*>(full.data()), data_end);
  EXPECT_EQ(GgufFile::from_bytes(as_bytes(cut)).tensors().size(), kTensors.size());
}

TEST(GgufHostile, EveryByteFlippedNeverCrashes) {
  GgufWriter w = every_type_writer();
  add_tensors(w);
  const std::vector<std::byte> full = w.bytes();
  const GgufFile f = GgufFile::from_bytes(full);
  for (size_t i = 0; i < f.data_offset(); ++i) {
    for (uint8_t flip : {0xffu, 0x80u, 0x01u}) {
      std::string bytes = as_string(full);
      bytes[i] = static_cast<char>(bytes[i] ^ flip);
      try {
        const GgufFile g = GgufFile::from_bytes(as_bytes(bytes));
        for (const GgufTensor& t : g.tensors()) ASSERT_LE(g.data_offset() + t.offset + t.nbytes, bytes.size());
      } catch (const Error&) {
      }
    }
  }
}

TEST(GgufHostile, MagicAndVersion) {
  std::string bytes = one_tensor_file();
  bytes[0] = 'X';
  expect_rejected(bytes, "not a GGUF file (magic is \"XGUF\"");
  expect_rejected("GGU", "too short for the GGUF magic");
  expect_rejected("", "too short");
  for (uint32_t v : {0u, 1u, 4u, 0xffffffffu}) {
    Raw r;
    r.header(0, 0, v);
    expect_rejected(r.bytes(), fmt::format("GGUF version {} is not supported", v));
  }
  Raw big;
  big.header(0, 0, 0x03000000u);
  expect_rejected(big.bytes(), "big-endian GGUF (version 3) is not supported");
  expect_rejected(std::string("GGUF\x03\0\0\0", 8), "truncated: tensor count");
}

TEST(GgufHostile, HugeCountsAndLengths) {
  expect_rejected(Raw().header(0, 1ull << 62).bytes(), "metadata count 4611686018427387904 cannot fit");
  expect_rejected(Raw().header(~0ull, 0).bytes(), "tensor count 18446744073709551615 cannot fit");
  expect_rejected(Raw().header(1ull << 40, 1).str("k").u32(0).u8(1).bytes(), "tensor count");
  // A key whose length runs past the end.
  expect_rejected(Raw().header(0, 1).u64(~0ull).u32(0).u8(0).bytes(), "has string length 18446744073709551615");
  expect_rejected(Raw().header(0, 1).u64(1000).u32(0).u8(0).bytes(), "string length 1000");
  // A string value, and an array, longer than the file.
  expect_rejected(Raw().header(0, 1).str("s").u32(8).u64(1ull << 60).bytes(), "metadata key 's'");
  expect_rejected(Raw().header(0, 1).str("a").u32(9).u32(4).u64(1ull << 61).bytes(),
                  "metadata key 'a': array of 2305843009213693952 u32 elements cannot fit");
  expect_rejected(Raw().header(0, 1).str("a").u32(9).u32(8).u64(~0ull).bytes(), "string elements cannot fit");
  expect_rejected(Raw().header(0, 1).str("a").u32(9).u32(8).u64(1).u64(5).bytes(), "truncated");
  // A tensor name longer than the file.
  expect_rejected(Raw().header(1, 0).u64(1ull << 50).u32(0).u32(0).u64(0).bytes(), "tensor name 0");
}

TEST(GgufHostile, MetadataTypes) {
  expect_rejected(Raw().header(0, 1).str("k").u32(13).u64(0).bytes(), "metadata key 'k': unknown value type 13");
  expect_rejected(Raw().header(0, 1).str("k").u32(0xffffffff).u64(0).bytes(), "unknown value type 4294967295");
  expect_rejected(Raw().header(0, 1).str("k").u32(9).u32(77).u64(0).bytes(), "unknown array element type 77");
  expect_rejected(Raw().header(0, 1).str("k").u32(9).u32(9).u64(0).bytes(), "arrays of arrays are not supported");
  expect_rejected(Raw().header(0, 1).str("k").u32(7).u8(2).bytes(), "metadata key 'k': bool value 2 is not 0 or 1");
  expect_rejected(Raw().header(0, 1).str("k").u32(9).u32(7).u64(2).u8(1).u8(9).bytes(), "bool value 9");
  expect_rejected(Raw().header(0, 2).kv_u32("dup", 1).kv_u32("dup", 2).bytes(), "metadata key 'dup': appears twice");
}

TEST(GgufHostile, Alignment) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
    expect_rejected(Raw().header(0, 1).kv_u32("general.alignment", a).bytes(),
                    fmt::format("'general.alignment' = {} is not a non-zero power of two", a));
  }
  expect_rejected(Raw().header(0, 1).str("general.alignment").u32(10).u64(32).bytes(),
                  "'general.alignment' is u64, expected u32");
  // A huge alignment puts the data region past the end of the file.
  Raw r;
  r.header(1, 1).kv_u32("general.alignment", 1u << 31).tensor("w", {8}, 0, 0).pad().data(32);
  expect_rejected(r.bytes(), "tensor 'w': data [0, 32) runs past the end of the data region (0 bytes");
}

TEST(GgufHostile, TensorInfos) {
  expect_rejected(one_tensor_file(0, {8}, 16), "tensor 'w': offset 16 is not a multiple of the alignment 32");
  expect_rejected(one_tensor_file(0, {8}, 32), "tensor 'w': data [32, 64) runs past the end of the data region");
  expect_rejected(one_tensor_file(0, {8}, ~0ull << 5), "runs past the end");
  expect_rejected(one_tensor_file(0, {9}), "tensor 'w': data [0, 36) runs past the end");
  expect_rejected(one_tensor_file(4), "tensor 'w': unknown ggml type 4");
  expect_rejected(one_tensor_file(31), "unknown ggml type 31");
  expect_rejected(one_tensor_file(123456), "unknown ggml type 123456");
  expect_rejected(one_tensor_file(0, {8, 0}), "tensor 'w': dimension 1 is 0");
  expect_rejected(one_tensor_file(0, {0}), "dimension 0 is 0");
  expect_rejected(one_tensor_file(0, {1, 1, 1, 1, 1}), "tensor 'w': 5 dimensions, more than the 4 GGUF allows");
  expect_rejected(one_tensor_file(0, {~0ull}), "dimension 0 = 18446744073709551615 is too large");
  expect_rejected(one_tensor_file(0, {1ull << 32, 1ull << 32}), "overflow a 64-bit element count");
  expect_rejected(one_tensor_file(0, {1ull << 31, 1ull << 31}),
                  "dims [2147483648, 2147483648] of f32 overflow a 64-bit byte count");
  expect_rejected(one_tensor_file(2, {16}), "tensor 'w': dimension 0 (16) is not a multiple of the q4_0 block size 32");
  expect_rejected(one_tensor_file(12, {255, 2}), "not a multiple of the q4_K block size 256");

  Raw dup;
  dup.header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad().data(64);
  expect_rejected(dup.bytes(), "tensor 'w': name appears twice");

  Raw overlap;
  overlap.header(3, 0).tensor("a", {8}, 0, 0).tensor("b", {24}, 0, 64).tensor("c", {8}, 0, 96).pad().data(160);
  expect_rejected(overlap.bytes(), "tensors 'b' [64, 160) and 'c' [96, 128) overlap");
  Raw same;
  same.header(2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 0).pad().data(32);
  expect_rejected(same.bytes(), "overlap");
  // Adjacent is fine, and so are tensors listed out of offset order.
  Raw ok;
  ok.header(2, 0).tensor("b", {8}, 0, 32).tensor("a", {8}, 0, 0).pad().data(64);
  EXPECT_EQ(GgufFile::from_bytes(as_bytes(ok.bytes())).tensor("b").offset, 32u);
}

TEST(GgufHostile, ControlCharactersInNamesStayOnOneLine) {
  Raw r;
  r.header(1, 0).tensor("bad\nname\x01", {8}, 4, 0).pad().data(32);
  const std::string msg = open_error(r.bytes());
  EXPECT_NE(msg.find("tensor 'bad?name?': unknown ggml type 4"), std::string::npos) << msg;
}

TEST(GgufHostile, FileErrorsNameThePath) {
  ScopedTempDir dir("specula-gguf");
  const std::string path = dir.file("bad.gguf");
  {
    std::ofstream out(path, std::ios::binary);
    const std::string bytes = one_tensor_file(99);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const std::string msg = error_of([&] { GgufFile::open(path); });
  EXPECT_NE(msg.find(path + ": tensor 'w': unknown ggml type 99"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { GgufFile::open(dir.file("missing.gguf")); }).find("missing.gguf"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Fuzz seeds

// fuzz/corpus/gguf/valid_*.gguf must stay valid files (the fuzzer mutates them from there).
TEST(GgufSeeds, ValidSeedsOpen) {
  const fs::path dir = fs::path(SPECULA_FUZZ_DIR) / "corpus" / "gguf";
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("valid_", 0) != 0) continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_LT(fs::file_size(e.path()), 4096u);
    const GgufFile f = GgufFile::open(e.path().string());
    for (const GgufTensor& t : f.tensors()) {
      if (!ggml_dequant_supported(t.type)) continue;
      std::vector<float> row(static_cast<size_t>(t.ne0()));
      for (int64_t r = 0; r < t.rows(); ++r) dequantize_gguf_row(t, r, row.data());
    }
    ++n;
  }
  EXPECT_GE(n, 3u);
}

// Writes the seed corpus: SPECULA_GGUF_SEED_DIR=fuzz/corpus/gguf specula_unit_tests
//   --gtest_also_run_disabled_tests --gtest_filter=GgufSeeds.DISABLED_Write
TEST(GgufSeeds, DISABLED_Write) {
  const char* dir = std::getenv("SPECULA_GGUF_SEED_DIR");
  ASSERT_NE(dir, nullptr) << "set SPECULA_GGUF_SEED_DIR";
  const auto save = [&](const std::string& name, const GgufWriter& w) { w.write((fs::path(dir) / name).string()); };
  std::vector<float> values(256);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * static_cast<float>(i));
  const auto quantized = [&](GgmlType t, int64_t n) {
    std::vector<std::byte> out(*ggml_row_bytes(t, static_cast<uint64_t>(n)));
    quantize_row_ggml(t, values.data(), out.data(), n);
    return out;
  };
  {
    GgufWriter w;
    w.set_string("general.architecture", "gemma4");
    w.set_u32("gemma4.block_count", 2);
    w.set_f32("gemma4.rope.freq_base", 10000.0f);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_string_array("tokenizer.ggml.tokens", {"<pad>", "<bos>", "a", "b"});
    w.set_array<float>("tokenizer.ggml.scores", std::vector<float>{0, 0, -1, -2});
    w.set_array<int32_t>("tokenizer.ggml.token_type", std::vector<int32_t>{3, 3, 1, 1});
    w.add_tensor("output_norm.weight", GgmlType::F32, {8}, quantized(GgmlType::F32, 8));
    w.add_tensor("token_embd.weight", GgmlType::Q4_0, {32, 2}, quantized(GgmlType::Q4_0, 64));
    save("valid_small.gguf", w);
  }
  {
    GgufWriter w;
    for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0}) {
      w.add_tensor(std::string(ggml_type_name(t)), t, {32}, quantized(t, 32));
    }
    save("valid_block_types.gguf", w);
  }
  {
    GgufWriter w(8);
    w.set_u64("general.file_type", 15);
    w.add_tensor("q4_K", GgmlType::Q4_K, {256}, quantized(GgmlType::Q4_K, 256));
    w.add_tensor("q5_K", GgmlType::Q5_K, {256}, quantized(GgmlType::Q5_K, 256));
    w.add_tensor("q6_K", GgmlType::Q6_K, {256}, quantized(GgmlType::Q6_K, 256));
    save("valid_k_quants.gguf", w);
  }
  {
    GgufWriter w = every_type_writer();
    w.add_tensor("i8", GgmlType::I8, {3}, pattern_bytes(3, 1));
    save("valid_every_metadata_type.gguf", w);
  }
  {
    GgufWriter w;
    save("valid_empty.gguf", w);
  }
  // A small gemma4 tokenizer (text/gguf_tokenizer.h) and two faults the fuzzer starts from.
  const auto tokenizer_writer = [] {
    GgufWriter w;
    w.set_string("general.architecture", "gemma4");
    w.set_string("tokenizer.ggml.model", "gemma4");
    w.set_string_array("tokenizer.ggml.tokens",
                       {"<pad>", "<eos>", "<bos>", "<unk>", "\n", "\n\n", "a", "b", "ab", "\u2581", "\u2581ab",
                        "<unused0>", "<|turn>", "<0x0A>", "<0xC3>", "<0xA9>"});
    w.set_array<float>("tokenizer.ggml.scores", std::vector<float>(16, -1000.0f));
    w.set_array<int32_t>("tokenizer.ggml.token_type",
                         std::vector<int32_t>{3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 6, 6, 6});
    w.set_string_array("tokenizer.ggml.merges", {"a b", "\xE2\x96\x81 ab", "\n \n"});
    w.set_u32("tokenizer.ggml.bos_token_id", 2);
    w.set_u32("tokenizer.ggml.eos_token_id", 1);
    w.set_u32("tokenizer.ggml.unknown_token_id", 3);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_string(
        "tokenizer.chat_template",
        "{{ bos_token }}{% for m in messages %}<|turn>{{ m['role'] }}\n{{ m['content'] }}<turn|>\n{% endfor %}");
    return w;
  };
  save("valid_gemma4_tokenizer.gguf", tokenizer_writer());
  {
    GgufWriter w = tokenizer_writer();
    w.set_array<int32_t>("tokenizer.ggml.token_type", std::vector<int32_t>{3, 3, 3, 3, 1});
    save("tokenizer_type_count.gguf", w);
  }
  {
    GgufWriter w = tokenizer_writer();
    w.set_string_array("tokenizer.ggml.merges", {"a b", "ab", "x y"});
    save("tokenizer_bad_merges.gguf", w);
  }
}

}  // namespace
}  // namespace specula
