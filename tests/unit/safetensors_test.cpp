// safetensors reader/writer: round trips, sharded checkpoints, goldens, and a hostile-file corpus
// (every malformed file must be rejected with specula::Error, never a crash).
#include "specula/io/safetensors.h"
#include "specula/io/weight_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "error_of.h"
#include "specula/util/error.h"
#include "temp_dir.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using test::ScopedTempDir;

void write_raw(const std::string& path, const std::string& bytes) {
  // Unlink first: truncating a file with data makes ext4 flush it (auto_da_alloc), which is slow.
  std::error_code ec;
  fs::remove(path, ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

// A raw safetensors file: length field, header text as given, then `data_len` data bytes.
std::string raw_file(const std::string& header, size_t data_len) {
  return le64(header.size()) + header + std::string(data_len, '\x5a');
}

using test::error_of;
using test::pattern_bytes;

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(Safetensors, RoundTripEveryDtype) {
  ScopedTempDir dir("specula-st");
  const std::string path = dir.file("all.safetensors");
  const std::vector<DType> dtypes = {DType::BF16, DType::F16, DType::F32, DType::F64, DType::U8,
                                     DType::I8,   DType::U32, DType::I32, DType::I64};
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {3, 0}, {5}, {2, 3}, {2, 1, 3}};
  std::vector<TensorSpec> specs;
  std::vector<std::vector<std::byte>> expected;
  unsigned seed = 0;
  // Declared deliberately out of alphabetical order; the header must keep this order.
  for (auto it = dtypes.rbegin(); it != dtypes.rend(); ++it) {
    for (const auto& shape : shapes) {
      int64_t numel = 1;
      for (auto d : shape) numel *= d;
      auto bytes = pattern_bytes(static_cast<size_t>(numel) * dtype_size(*it), ++seed);
      const std::string name = fmt::format("t{}.{}", 100 - seed, dtype_name(*it));
      expected.push_back(bytes);
      specs.push_back(tensor_from_bytes(name, *it, shape, std::move(bytes)));
    }
  }
  WriteOptions opts;
  opts.metadata = {{"format", "pt"}, {"note", "round \"trip\""}};
  write_safetensors(path, specs, opts);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const std::string raw = read_raw(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header must be padded so data starts 8-aligned";
  const std::string header = raw.substr(8, n);
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"format\":\"pt\",\"note\":\"round \\\"trip\\\"\"}", 0), 0u) << header;
  size_t last = 0;
  for (const auto& s : specs) {
    const size_t pos = header.find("\"" + s.name + "\"");
    ASSERT_NE(pos, std::string::npos) << s.name;
    EXPECT_GT(pos, last) << "declared order lost at " << s.name;
    last = pos;
  }

  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.file_size(), raw.size());
  ASSERT_EQ(f.tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorView* v = f.find(specs[i].name);
    ASSERT_NE(v, nullptr) << specs[i].name;
    EXPECT_EQ(v->dtype, specs[i].dtype);
    EXPECT_EQ(v->shape, specs[i].shape);
    EXPECT_EQ(v->nbytes, expected[i].size());
    EXPECT_EQ(v->file, &f.path());
    EXPECT_EQ(std::vector<std::byte>(v->data, v->data + v->nbytes), expected[i]) << specs[i].name;
    int64_t numel = 1;
    for (auto d : specs[i].shape) numel *= d;
    EXPECT_EQ(v->numel(), numel);
  }
  EXPECT_EQ(f.find("absent"), nullptr);
  EXPECT_EQ(f.find("t99.I64")->shape_str(), "[]");
  EXPECT_EQ(f.find("t95.I64")->shape_str(), "[2, 3]");
}

TEST(Safetensors, NoMetadataWritesNoMetadataKey) {
  ScopedTempDir dir("specula-st");
  const std::string path = dir.file("m.safetensors");
  WriteOptions opts;
  opts.metadata.clear();
  write_safetensors(path, {tensor_from_bytes("a", DType::U8, {2}, pattern_bytes(2, 1))}, opts);
  EXPECT_EQ(read_raw(path).find("__metadata__"), std::string::npos);
  EXPECT_EQ(SafetensorsFile::open(path).tensors().size(), 1u);
}

TEST(Safetensors, ChunkedFillUsesWholeRowsAndReportsProgress) {
  ScopedTempDir dir("specula-st");
  const std::string path = dir.file("chunked.safetensors");
  std::vector<std::pair<int64_t, int64_t>> calls_a, calls_b, calls_c;
  const auto make = [](std::string name, std::vector<int64_t> shape, size_t row_bytes,
                       std::vector<std::pair<int64_t, int64_t>>* calls) {
    TensorSpec s;
    s.name = std::move(name);
    s.dtype = DType::F32;
    s.shape = std::move(shape);
    s.fill = [calls, row_bytes](int64_t r0, int64_t r1, std::span<std::byte> out) {
      calls->emplace_back(r0, r1);
      ASSERT_EQ(out.size(), static_cast<size_t>(r1 - r0) * row_bytes);
      // Each byte encodes its row and position so misplaced chunks show up on read-back.
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<std::byte>((r0 + static_cast<int64_t>(i / row_bytes)) * 16 + i % row_bytes);
    };
    return s;
  };
  std::vector<TensorSpec> specs = {make("a", {10, 3}, 12, &calls_a),   // 2 rows per 25-byte chunk
                                   make("b", {}, 4, &calls_b),         // 0-d: one row
                                   make("c", {3, 10}, 40, &calls_c)};  // row > chunk: 1 row a call
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  WriteOptions opts;
  opts.chunk_bytes = 25;
  opts.progress = [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); };
  write_safetensors(path, specs, opts);

  const std::vector<std::pair<int64_t, int64_t>> want_a = {{0, 2}, {2, 4}, {4, 6}, {6, 8}, {8, 10}};
  const std::vector<std::pair<int64_t, int64_t>> want_b = {{0, 1}};
  const std::vector<std::pair<int64_t, int64_t>> want_c = {{0, 1}, {1, 2}, {2, 3}};
  EXPECT_EQ(calls_a, want_a);
  EXPECT_EQ(calls_b, want_b);
  EXPECT_EQ(calls_c, want_c);

  // Progress counts tensor data bytes: 10*3*4 + 4 + 3*10*4, reported after every chunk.
  const uint64_t data_bytes = 244;
  ASSERT_EQ(progress.size(), want_a.size() + want_b.size() + want_c.size());
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].second, data_bytes);
    if (i) {
      EXPECT_GT(progress[i].first, progress[i - 1].first);
    }
  }
  EXPECT_EQ(progress.back().first, data_bytes);

  const SafetensorsFile f = SafetensorsFile::open(path);
  for (const char* name : {"a", "c"}) {
    const TensorView& v = *f.find(name);
    const size_t row_bytes = v.nbytes / static_cast<size_t>(v.dim(0));
    for (size_t i = 0; i < v.nbytes; ++i)
      ASSERT_EQ(std::to_integer<int>(v.data[i]), static_cast<int>(((i / row_bytes) * 16 + i % row_bytes) & 0xff))
          << name << " byte " << i;
  }
}

TEST(Safetensors, WriterFailuresLeaveNoFile) {
  ScopedTempDir dir("specula-st");
  const std::string path = dir.file("fail.safetensors");
  TensorSpec bad;
  bad.name = "boom";
  bad.dtype = DType::U8;
  bad.shape = {4};
  bad.fill = [](int64_t, int64_t, std::span<std::byte>) { throw Error("fill failed"); };
  EXPECT_EQ(error_of([&] { write_safetensors(path, {bad}); }), "fill failed");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const std::string missing_dir = dir.file("no/such/dir/x.safetensors");
  EXPECT_NE(error_of([&] { write_safetensors(missing_dir, {}); }).find(missing_dir), std::string::npos);

  auto a = tensor_from_bytes("dup", DType::U8, {1}, pattern_bytes(1, 0));
  EXPECT_NE(error_of([&] { write_safetensors(path, {a, a}); }).find("tensor 'dup' declared twice"), std::string::npos);
  EXPECT_NE(error_of([] {
              tensor_from_bytes("x", DType::F32, {3}, pattern_bytes(11, 0));
            }).find("11 bytes given but shape [3] of F32 needs 12"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(path));
}

// ---------------------------------------------------------------------------------------------
// Checkpoint directories

void write_tensors(const std::string& path, const std::vector<std::string>& names) {
  std::vector<TensorSpec> specs;
  unsigned seed = 0;
  for (const auto& n : names) specs.push_back(tensor_from_bytes(n, DType::BF16, {2, 2}, pattern_bytes(8, ++seed)));
  write_safetensors(path, specs);
}

TEST(TensorStore, ShardedCheckpointViaIndex) {
  ScopedTempDir dir("specula-st");
  write_tensors(dir.file("model-00001-of-00002.safetensors"), {"a", "b"});
  write_tensors(dir.file("model-00002-of-00002.safetensors"), {"c"});
  write_raw(dir.file("model.safetensors.index.json"),
            R"({"metadata": {"total_size": 24}, "weight_map": {)"
            R"("a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",)"
            R"("c": "model-00002-of-00002.safetensors"}})");
  // A stray file the index does not mention must not be read.
  write_tensors(dir.file("stray.safetensors"), {"a"});

  TensorStore store = TensorStore::open_dir(dir.path().string());
  EXPECT_EQ(store.dir(), dir.path().string());
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(*store.get("c").file, dir.file("model-00002-of-00002.safetensors"));
  EXPECT_EQ(store.total_bytes(), fs::file_size(dir.file("model-00001-of-00002.safetensors")) +
                                     fs::file_size(dir.file("model-00002-of-00002.safetensors")));
  const auto want = pattern_bytes(8, 2);
  EXPECT_EQ(std::memcmp(store.get("b").data, want.data(), 8), 0);
  EXPECT_FALSE(store.contains("d"));
  const std::string msg = error_of([&] { store.get("d"); });
  EXPECT_NE(msg.find("tensor 'd' not found in " + dir.path().string()), std::string::npos) << msg;

  // Views stay valid when the store moves.
  const TensorView* before = store.find("a");
  TensorStore moved = std::move(store);
  EXPECT_EQ(moved.find("a"), before);
}

TEST(TensorStore, IndexErrorsNameTensorAndShard) {
  {
    ScopedTempDir dir("specula-st");
    write_tensors(dir.file("s1.safetensors"), {"a"});
    write_raw(dir.file("model.safetensors.index.json"),
              R"({"weight_map": {"a": "s1.safetensors", "ghost": "s1.safetensors"}})");
    const std::string msg = error_of([&] { TensorStore::open_dir(dir.path().string()); });
    EXPECT_NE(msg.find("tensor 'ghost' is listed in shard 's1.safetensors'"), std::string::npos) << msg;
  }
  {
    ScopedTempDir dir("specula-st");
    write_tensors(dir.file("s1.safetensors"), {"a"});
    write_raw(dir.file("model.safetensors.index.json"),
              R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
    const std::string msg = error_of([&] { TensorStore::open_dir(dir.path().string()); });
    EXPECT_NE(msg.find("shard 's2.safetensors' (holding tensor 'b') does not exist"), std::string::npos) << msg;
  }
  {
    ScopedTempDir dir("specula-st");
    write_raw(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": "../x.safetensors"}})");
    const std::string msg = error_of([&] { TensorStore::open_dir(dir.path().string()); });
    EXPECT_NE(msg.find("outside the directory"), std::string::npos) << msg;
  }
  {
    ScopedTempDir dir("specula-st");
    write_raw(dir.file("model.safetensors.index.json"), R"({"weight_map": [1]})");
    const std::string msg = error_of([&] { TensorStore::open_dir(dir.path().string()); });
    EXPECT_NE(msg.find("\"weight_map\" is an array, not an object"), std::string::npos) << msg;
  }
  {
    ScopedTempDir dir("specula-st");
    write_raw(dir.file("model.safetensors.index.json"), "{not json");
    const std::string msg = error_of([&] { TensorStore::open_dir(dir.path().string()); });
    EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  }
}

TEST(TensorStore, ModelShardNames) {
  EXPECT_TRUE(is_model_shard_name("model.safetensors"));
  EXPECT_TRUE(is_model_shard_name("model-00001-of-00003.safetensors"));
  EXPECT_TRUE(is_model_shard_name("model-1-of-2.safetensors"));
  EXPECT_FALSE(is_model_shard_name("optiq_vision.safetensors"));
  EXPECT_FALSE(is_model_shard_name("model-00001-of-.safetensors"));
  EXPECT_FALSE(is_model_shard_name("model-x-of-00002.safetensors"));
  EXPECT_FALSE(is_model_shard_name("model-00001-of-00002.safetensors.tmp"));
  EXPECT_FALSE(is_model_shard_name("model--of-.safetensors"));
}

TEST(TensorStore, SingleFileGlobAndDuplicates) {
  {
    ScopedTempDir dir("specula-st");  // model.safetensors wins over other files
    write_tensors(dir.file("model.safetensors"), {"m"});
    write_tensors(dir.file("other.safetensors"), {"o"});
    const TensorStore store = TensorStore::open_dir(dir.path().string());
    EXPECT_EQ(store.names(), std::vector<std::string>{"m"});
  }
  {
    ScopedTempDir dir(
        "specula-st");  // no model.safetensors: the model-N-of-M shards, sorted; sidecars are never opened
    write_tensors(dir.file("model-00002-of-00002.safetensors"), {"y"});
    write_tensors(dir.file("model-00001-of-00002.safetensors"), {"x"});
    write_tensors(dir.file("optiq_vision.safetensors"), {"x"});  // would clash with "x" if opened
    write_raw(dir.file("notes.txt"), "ignored");
    const TensorStore store = TensorStore::open_dir(dir.path().string());
    EXPECT_EQ(store.names(), (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(*store.get("x").file, dir.file("model-00001-of-00002.safetensors"));
  }
  {
    ScopedTempDir dir("specula-st");
    write_tensors(dir.file("model-00001-of-00002.safetensors"), {"w", "u"});
    write_tensors(dir.file("model-00002-of-00002.safetensors"), {"w"});
    const std::string msg = error_of([&] { TensorStore::open_dir(dir.path().string()); });
    EXPECT_NE(msg.find("tensor 'w' is in both " + dir.file("model-00001-of-00002.safetensors") + " and " +
                       dir.file("model-00002-of-00002.safetensors")),
              std::string::npos)
        << msg;
  }
  {
    ScopedTempDir dir("specula-st");
    write_tensors(dir.file("a.safetensors"), {"w", "u"});
    write_tensors(dir.file("b.safetensors"), {"w"});
    const std::string msg = error_of([&] { TensorStore::open_dir(dir.path().string()); });
    EXPECT_NE(msg.find("no safetensors files in " + dir.path().string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("not model shards: a.safetensors, b.safetensors"), std::string::npos) << msg;
    const std::string msg2 = error_of([&] {
      TensorStore::open_files({dir.file("b.safetensors"), dir.file("a.safetensors")});
    });
    EXPECT_NE(msg2.find("tensor 'w' is in both"), std::string::npos) << msg2;
  }
  {
    ScopedTempDir dir("specula-st");
    write_raw(dir.file("readme.md"), "x");
    EXPECT_NE(error_of([&] {
                TensorStore::open_dir(dir.path().string());
              }).find("no safetensors files in " + dir.path().string()),
              std::string::npos);
    EXPECT_NE(error_of([&] { TensorStore::open_dir(dir.file("nope")); }).find("is not a directory"), std::string::npos);
  }
}

TEST(TensorStore, FromViewsHasNoDataAndCountsBytes) {
  TensorView a;
  a.name = "big";
  a.dtype = DType::BF16;
  a.shape = {262144, 2560};
  a.data = reinterpret_cast<const std::byte*>(&a);  // must be dropped
  TensorView b;
  b.name = "small";
  b.dtype = DType::U32;
  b.shape = {3};
  TensorStore store = TensorStore::from_views("/synthetic", {a, b});
  TensorStore moved = std::move(store);
  const TensorView& v = moved.get("big");
  EXPECT_EQ(v.data, nullptr);
  EXPECT_EQ(v.nbytes, 262144ull * 2560 * 2);
  ASSERT_NE(v.file, nullptr);
  EXPECT_EQ(*v.file, "/synthetic");
  EXPECT_EQ(moved.total_bytes(), 262144ull * 2560 * 2 + 12);
  EXPECT_EQ(moved.names(), (std::vector<std::string>{"big", "small"}));

  EXPECT_NE(error_of([&] {
              TensorStore::from_views("/s", {b, b});
            }).find("tensor 'small' given twice"),
            std::string::npos);
  TensorView neg = b;
  neg.shape = {-1};
  EXPECT_NE(error_of([&] { TensorStore::from_views("/s", {neg}); }).find("shape [-1] of U32"), std::string::npos);
}

TEST(TensorStore, EveryGoldenCheckpointOpens) {
  const fs::path root = fs::path(SPECULA_TEST_DATA) / "goldens";
  int opened = 0;
  for (const auto& c : fs::directory_iterator(root)) {
    for (const char* part : {"model", "drafter"}) {
      const fs::path file = c.path() / part / "model.safetensors";
      if (!fs::exists(file)) continue;
      SCOPED_TRACE(file.string());
      const SafetensorsFile f = SafetensorsFile::open(file.string());
      EXPECT_GT(f.tensors().size(), 0u);
      const TensorStore store = TensorStore::open_dir((c.path() / part).string());
      EXPECT_EQ(store.size(), f.tensors().size());
      EXPECT_EQ(store.total_bytes(), f.file_size());
      ++opened;
    }
  }
  EXPECT_GE(opened, 2) << "no golden checkpoints found under " << root;
}

// ---------------------------------------------------------------------------------------------
// Hostile corpus: each malformed file has its own message.

struct HostileCase {
  const char* name;
  std::string bytes;
  std::string expect;  // substring of the error message
};

std::vector<HostileCase> hostile_corpus() {
  const std::string ok_header = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string ok = raw_file(ok_header, 16);
  const auto one = [](const std::string& entry, size_t data) {
    return raw_file(R"({"__metadata__":{"format":"pt"},"x.weight":)" + entry + "}", data);
  };
  return {
      {"short file", std::string("\x10\0\0", 3), "is 3 bytes, too short for the 8-byte header length"},
      {"cut in data region", ok.substr(0, ok.size() - 5),
       "tensor 'w': data_offsets [0, 16] end past the data region (11 bytes)"},
      {"header longer than file", le64(1000) + ok_header,
       "header length 1000 is longer than the file (" + std::to_string(ok_header.size()) + " bytes"},
      {"header over cap", le64(kMaxSafetensorsHeader + 1) + ok_header, "exceeds the limit of"},
      {"header length zero", le64(0) + ok_header, "header length is 0"},
      {"not json", raw_file("{\"w\": [1, 2", 0), "header is not valid JSON"},
      {"json array", raw_file("[1, 2, 3]", 0), "header is an array, not a JSON object"},
      {"entry not object", one("[]", 0), "tensor 'x.weight': entry is an array, not a JSON object"},
      {"missing dtype", one(R"({"shape":[1],"data_offsets":[0,4]})", 4), "tensor 'x.weight': missing \"dtype\""},
      {"missing shape", one(R"({"dtype":"F32","data_offsets":[0,4]})", 4), "missing \"shape\""},
      {"missing offsets", one(R"({"dtype":"F32","shape":[1]})", 4), "missing \"data_offsets\""},
      {"dtype not string", one(R"({"dtype":7,"shape":[1],"data_offsets":[0,4]})", 4),
       "\"dtype\" is a number, not a string"},
      {"unknown dtype", one(R"({"dtype":"Q4_K","shape":[1],"data_offsets":[0,4]})", 4), "unknown dtype 'Q4_K'"},
      {"shape not array", one(R"({"dtype":"F32","shape":4,"data_offsets":[0,4]})", 4),
       "\"shape\" is a number, not an array"},
      {"negative dimension", one(R"({"dtype":"F32","shape":[2,-3],"data_offsets":[0,4]})", 4),
       "dimension 1 of \"shape\" = -3 is negative"},
      {"fractional dimension", one(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})", 4),
       "dimension 0 of \"shape\" is a number, not an integer"},
      {"offsets wrong arity", one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})", 8),
       "\"data_offsets\" must be an array of 2 integers, got [0,4,8]"},
      {"negative offset", one(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})", 8),
       "data_offsets[0] = -4 is negative"},
      {"offsets out of range", one(R"({"dtype":"F32","shape":[25],"data_offsets":[0,100]})", 40),
       "data_offsets [0, 100] end past the data region (40 bytes)"},
      {"begin after end", one(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})", 8),
       "data_offsets [8, 4] begin is after end"},
      {"size mismatch", one(R"({"dtype":"BF16","shape":[7,8],"data_offsets":[0,100]})", 100),
       "model.safetensors: tensor 'x.weight': data_offsets [0, 100] hold 100 bytes but shape [7, 8] of BF16 "
       "needs 112"},
      {"product overflow", one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]})", 0),
       "shape [4294967296, 4294967296] of F32 overflows a 64-bit byte count"},
      {"byte count overflow", one(R"({"dtype":"I64","shape":[2305843009213693952],"data_offsets":[0,0]})", 0),
       "shape [2305843009213693952] of I64 overflows"},
      {"overlap",
       raw_file(R"({"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]},)"
                R"("b":{"dtype":"U8","shape":[8],"data_offsets":[8,16]}})",
                16),
       "tensors 'a' [0, 16] and 'b' [8, 16] overlap"},
      {"duplicate name",
       raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                2),
       "tensor 'a': name appears twice in the header"},
  };
}

TEST(SafetensorsHostile, EveryCaseRejectedWithItsOwnMessage) {
  ScopedTempDir dir("specula-st");
  const std::string path = dir.file("model.safetensors");
  const auto corpus = hostile_corpus();
  std::set<std::string> messages;
  for (const auto& c : corpus) {
    SCOPED_TRACE(c.name);
    write_raw(path, c.bytes);
    const std::string msg = error_of([&] { SafetensorsFile::open(path); });
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "message must start with the path: " << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "message: " << msg << "\nwanted: " << c.expect;
    EXPECT_TRUE(messages.insert(msg).second) << "two cases share the message " << msg;
  }
  // The expected substrings are distinct too, so each case tests its own check.
  std::set<std::string> expects;
  for (const auto& c : corpus) EXPECT_TRUE(expects.insert(c.expect).second) << c.expect;
}

// Deeply nested JSON must neither overflow the stack while parsing nor while being destroyed.
TEST(SafetensorsHostile, DeepNestingIsRejected) {
  ScopedTempDir dir("specula-st");
  const std::string path = dir.file("deep.safetensors");
  const size_t depth = 100000;
  const std::string shape = std::string(depth, '[') + std::string(depth, ']');
  write_raw(path, raw_file(R"({"a":{"dtype":"U8","shape":)" + shape + R"(,"data_offsets":[0,0]}})", 0));
  const std::string msg = error_of([&] { SafetensorsFile::open(path); });
  EXPECT_NE(msg.find("tensor 'a': dimension 0 of \"shape\" is an array, not an integer"), std::string::npos) << msg;
  // Unterminated: a parse error whose message stays one bounded line.
  write_raw(path, raw_file(std::string(depth, '['), 0));
  const std::string msg2 = error_of([&] { SafetensorsFile::open(path); });
  EXPECT_NE(msg2.find("header is not valid JSON"), std::string::npos) << msg2;
  EXPECT_LT(msg2.size(), 400u);
}

TEST(SafetensorsHostile, EmptyTensorsMayShareOffsets) {
  ScopedTempDir dir("specula-st");
  const std::string path = dir.file("e.safetensors");
  write_raw(path, raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                           R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[2,2]},)"
                           R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                           8));
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.find("e")->nbytes, 0u);
  EXPECT_EQ(f.tensors().size(), 3u);
}

// Random byte flips of a small valid file: open either succeeds (and every view stays inside the
// mapping) or throws specula::Error. Runs under ASan in CI.
TEST(SafetensorsHostile, MutatedFilesNeverCrash) {
  ScopedTempDir dir("specula-st");
  const std::string valid = dir.file("valid.safetensors");
  write_safetensors(valid, {tensor_from_bytes("a.weight", DType::BF16, {3, 4}, pattern_bytes(24, 1)),
                            tensor_from_bytes("b", DType::I64, {2}, pattern_bytes(16, 2)),
                            tensor_from_bytes("scalar", DType::F32, {}, pattern_bytes(4, 3)),
                            tensor_from_bytes("empty", DType::U8, {0, 7}, {})});
  const std::string base = read_raw(valid);
  uint64_t header_len = 0;
  std::memcpy(&header_len, base.data(), 8);
  const std::string path = dir.file("mutant.safetensors");
  std::mt19937 rng(20261130);
  int opened = 0, rejected = 0;
  const char interesting[] = "{}[]\",:-0123456789e. \x00\xff";
  for (int iter = 0; iter < 2000; ++iter) {
    std::string m = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly hit the length field and header, where the parsing is.
      const size_t limit = (rng() % 8 != 0) ? 8 + header_len : m.size();
      const size_t pos = rng() % limit;
      switch (rng() % 3) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1u << (rng() % 8))); break;
        case 1: m[pos] = static_cast<char>(rng()); break;
        default: m[pos] = interesting[rng() % (sizeof(interesting) - 1)]; break;
      }
    }
    if (rng() % 10 == 0) m.resize(rng() % (m.size() + 1));
    write_raw(path, m);
    try {
      const SafetensorsFile f = SafetensorsFile::open(path);
      uint64_t sum = 0;
      for (const auto& v : f.tensors())
        for (size_t i = 0; i < v.nbytes; ++i) sum += std::to_integer<unsigned>(v.data[i]);
      EXPECT_LE(sum, 255ull * f.file_size());
      ++opened;
    } catch (const Error&) {
      ++rejected;
    }
  }
  // Both outcomes must occur, or the mutations are not exercising anything.
  EXPECT_GT(opened, 0);
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(opened + rejected, 2000);
}

}  // namespace
}  // namespace specula
