// The packed-weight cache file (model/packed_cache.h) on a copy of a tiny 4-bit golden checkpoint:
// the first load writes the file, the second maps the same bytes; a changed checkpoint, a damaged
// or foreign file is a miss that rewrites it (never a crash); an unwritable cache directory is one
// warning; a cache hit's pages are mapped in at load; a TargetModel loaded from the cache gives
// bitwise the logits of one packed in memory.
// Everything is written under a temporary directory the fixture removes.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "page_residency.h"
#include "specula/io/checkpoint.h"
#include "specula/kernels/matmul.h"
#include "specula/model/packed_cache.h"
#include "specula/model/target_model.h"
#include "specula/model/target_weights.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenModel = fs::path(SPECULA_TEST_DATA) / "goldens" / "e4b-like-q4g64-mlx" / "model";

// A checkpoint with its weight views and the packable matrices among them, as a load builds them.
struct Loaded {
  std::unique_ptr<TargetCheckpoint> checkpoint;
  TargetWeights weights;
  std::vector<WeightMatrix*> matrices;
  PackedWeights packed;
};

std::unique_ptr<Loaded> open_checkpoint(const fs::path& dir) {
  auto l = std::make_unique<Loaded>();
  l->checkpoint = std::make_unique<TargetCheckpoint>(load_target(dir.string()));
  l->weights = make_target_weights(*l->checkpoint);
  for (WeightMatrix* w : l->weights.matmul_matrices())
    if (packable(*w)) l->matrices.push_back(w);
  return l;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

class PackedCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "specula-packed-cache-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    model_ = root_ / "model";
    cache_ = root_ / "cache";
    fs::copy(kGoldenModel, model_, fs::copy_options::recursive);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  PackedCacheOptions options() {
    PackedCacheOptions o;
    o.dir = cache_.string();
    o.min_bytes = 0;
    o.warn = [this](const std::string& line) { warnings_.push_back(line); };
    return o;
  }

  // Opens the checkpoint and packs (or maps) its matrices; counts the matrices packed in memory.
  std::unique_ptr<Loaded> load(const PackedCacheOptions& o, int* packed_in_memory = nullptr) {
    auto l = open_checkpoint(model_);
    int n = 0;
    l->packed = load_packed_weights(l->checkpoint->store, l->matrices, o, pool_, [&n](const WeightMatrix&) { ++n; });
    if (packed_in_memory != nullptr) *packed_in_memory = n;
    return l;
  }

  fs::path cache_file() const { return packed_cache_file(cache_.string(), model_.string()); }

  // The file's fixed header fields (see packed_cache.h): key bytes at 16, data offset at 24, data bytes at 32.
  static constexpr size_t kKeyBytesAt = 16, kDataOffsetAt = 24, kDataBytesAt = 32, kKeyAt = 40;

  ThreadPool pool_{2};
  fs::path root_, model_, cache_;
  std::vector<std::string> warnings_;
};

// Every matrix's packed bytes of `a` equal those of `b`.
void expect_same_packed(const Loaded& a, const Loaded& b) {
  ASSERT_EQ(a.matrices.size(), b.matrices.size());
  for (size_t i = 0; i < a.matrices.size(); ++i) {
    ASSERT_NE(a.matrices[i]->packed, nullptr) << i;
    ASSERT_NE(b.matrices[i]->packed, nullptr) << i;
    EXPECT_EQ(
        std::memcmp(a.matrices[i]->packed, b.matrices[i]->packed, static_cast<size_t>(packed_bytes(*a.matrices[i]))), 0)
        << "matrix " << i;
  }
}

TEST_F(PackedCache, TheGoldenCheckpointHasPackableMatrices) {
  // The tests below mean something only if there is something to pack.
  EXPECT_GE(open_checkpoint(model_)->matrices.size(), 10u);
}

TEST_F(PackedCache, FirstLoadWritesTheFileAndTheSecondMapsTheSameBytes) {
  int packed_first = 0, packed_second = 0;
  auto first = load(options(), &packed_first);
  EXPECT_EQ(first->packed.source, PackedSource::CacheWritten);
  EXPECT_EQ(packed_first, static_cast<int>(first->matrices.size()));  // pages released as packed
  EXPECT_EQ(first->packed.cache_file, cache_file().string());
  ASSERT_TRUE(fs::is_regular_file(cache_file()));
  EXPECT_EQ(fs::path(cache_file()).extension(), kPackedCacheSuffix);

  auto second = load(options(), &packed_second);
  EXPECT_EQ(second->packed.source, PackedSource::CacheHit);
  EXPECT_EQ(packed_second, 0);  // the checkpoint pages were never touched
  ASSERT_NE(second->packed.mapping.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second->packed.mapping.data()) % (2u << 20), 0u);
  for (const WeightMatrix* w : second->matrices) {
    EXPECT_GE(w->packed, second->packed.mapping.data());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w->packed) % 64, 0u);
  }
  expect_same_packed(*first, *second);

  PackedCacheOptions none;  // no cache: plain in-memory packing, the reference bytes
  auto plain = load(none);
  EXPECT_EQ(plain->packed.source, PackedSource::Packed);
  EXPECT_TRUE(plain->packed.cache_file.empty());
  expect_same_packed(*plain, *second);
  EXPECT_TRUE(warnings_.empty());
  // Only the cache file is left in the directory (no temporaries).
  EXPECT_EQ(std::distance(fs::directory_iterator(cache_), fs::directory_iterator()), 1);
}

TEST_F(PackedCache, ACacheHitHasItsPagesMappedInAtLoad) {
  // Every forward reads all of them: mapped at load, they are not faulted in one by one by the
  // first forward's kernels.
  load(options());
  auto hit = load(options());
  ASSERT_EQ(hit->packed.source, PackedSource::CacheHit);
  const uint8_t* d = hit->packed.mapping.data();
  const size_t n = hit->packed.mapping.size();
  ASSERT_GT(n, 0u);
  EXPECT_TRUE(page_present(d));
  EXPECT_TRUE(page_present(d + n / 2));
  EXPECT_TRUE(page_present(d + n - 1));
}

TEST_F(PackedCache, NoDirectoryOrSmallWeightsNeitherReadNorWrite) {
  PackedCacheOptions off = options();
  off.dir.clear();
  EXPECT_EQ(load(off)->packed.source, PackedSource::Packed);
  PackedCacheOptions big = options();
  big.min_bytes = uint64_t{1} << 40;
  EXPECT_EQ(load(big)->packed.source, PackedSource::Packed);
  EXPECT_FALSE(fs::exists(cache_));
  // A valid file is not read either when the weights are below the threshold.
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  EXPECT_EQ(load(big)->packed.source, PackedSource::Packed);
}

TEST_F(PackedCache, NothingToPackIsNone) {
  auto l = open_checkpoint(model_);
  const PackedWeights p = load_packed_weights(l->checkpoint->store, {}, options(), pool_);
  EXPECT_EQ(p.source, PackedSource::None);
  EXPECT_FALSE(fs::exists(cache_));
}

TEST_F(PackedCache, ANewMtimeOrSizeOfAWeightFileOrTheConfigMissesAndRewrites) {
  ASSERT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  const std::vector<uint8_t> original = read_bytes(cache_file());

  const fs::path weights = model_ / "model.safetensors";
  fs::last_write_time(weights, fs::last_write_time(weights) + std::chrono::seconds(5));
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  EXPECT_NE(read_bytes(cache_file()), original);  // the key now holds the new mtime
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheHit);

  const fs::path config = model_ / "config.json";
  fs::last_write_time(config, fs::last_write_time(config) + std::chrono::seconds(5));
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheHit);

  // Same mtime, another size: a byte appended to config.json (still valid JSON).
  const auto mtime = fs::last_write_time(config);
  std::ofstream(config, std::ios::app) << "\n";
  fs::last_write_time(config, mtime);
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheHit);

  // A replaced file (new inode) with the old size and mtime misses too.
  const auto wtime = fs::last_write_time(weights);
  fs::copy_file(weights, root_ / "copy.safetensors");
  fs::rename(root_ / "copy.safetensors", weights);
  fs::last_write_time(weights, wtime);
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheHit);
}

TEST_F(PackedCache, ACopyOfTheCheckpointElsewhereHasItsOwnFile) {
  ASSERT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  const fs::path other = root_ / "other";
  fs::copy(model_, other, fs::copy_options::recursive);
  EXPECT_NE(packed_cache_file(cache_.string(), other.string()), cache_file().string());
  // The same directory spelled differently is the same file.
  EXPECT_EQ(packed_cache_file(cache_.string(), model_.string() + "/"), cache_file().string());
  EXPECT_EQ(packed_cache_file(cache_.string(), (model_ / ".." / "model").string()), cache_file().string());
}

TEST_F(PackedCache, DamagedOrForeignFilesAreMissesThatGetRewritten) {
  ASSERT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  const std::vector<uint8_t> good = read_bytes(cache_file());
  ASSERT_GT(good.size(), kKeyAt + 100);
  uint64_t data_offset = 0, data_bytes = 0;
  std::memcpy(&data_offset, good.data() + kDataOffsetAt, 8);
  std::memcpy(&data_bytes, good.data() + kDataBytesAt, 8);
  ASSERT_EQ(data_offset + data_bytes, good.size());

  struct Damage {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> apply;
  };
  const std::vector<Damage> damages = {
      {"empty", [](auto& b) { b.clear(); }},
      {"10 bytes", [](auto& b) { b.resize(10); }},
      {"header only", [](auto& b) { b.resize(kKeyAt); }},
      {"truncated by one byte", [](auto& b) { b.pop_back(); }},
      {"truncated to the data offset", [&](auto& b) { b.resize(data_offset); }},
      {"one byte appended", [](auto& b) { b.push_back(0); }},
      {"garbage header",
       [](auto& b) {
         for (size_t i = 0; i < kKeyAt; ++i) b[i] = static_cast<uint8_t>(i * 37 + 11);
       }},
      {"wrong magic", [](auto& b) { b[0] ^= 0xFF; }},
      {"older layout version", [](auto& b) { b[8] = static_cast<uint8_t>(kPackedLayoutVersion - 1); }},
      {"newer layout version", [](auto& b) { b[8] = static_cast<uint8_t>(kPackedLayoutVersion + 1); }},
      {"huge key length", [](auto& b) { put_u64(b, kKeyBytesAt, uint64_t{1} << 62); }},
      {"key length past the end", [&](auto& b) { put_u64(b, kKeyBytesAt, b.size()); }},
      {"data offset past the end", [&](auto& b) { put_u64(b, kDataOffsetAt, b.size() + (2u << 20)); }},
      {"data offset wraps", [](auto& b) { put_u64(b, kDataOffsetAt, ~uint64_t{0} - 4095); }},
      {"data length past the end", [&](auto& b) { put_u64(b, kDataBytesAt, data_bytes + 64); }},
      {"data length wraps", [](auto& b) { put_u64(b, kDataBytesAt, ~uint64_t{0}); }},
      {"another key (one byte of it changed)", [](auto& b) { b[kKeyAt + 30] ^= 0x01; }},
      {"all zeros", [](auto& b) { std::fill(b.begin(), b.end(), 0); }},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    std::vector<uint8_t> bad = good;
    d.apply(bad);
    write_bytes(cache_file(), bad);
    int packed = 0;
    auto l = load(options(), &packed);
    EXPECT_EQ(l->packed.source, PackedSource::CacheWritten);
    EXPECT_EQ(packed, static_cast<int>(l->matrices.size()));
    EXPECT_EQ(read_bytes(cache_file()), good);  // rewritten whole
  }
  // A directory where the file should be: a miss, and the write fails with one warning.
  fs::remove(cache_file());
  fs::create_directory(cache_file());
  EXPECT_EQ(load(options())->packed.source, PackedSource::Packed);
  EXPECT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(warnings_.empty() || warnings_[0].find(cache_file().string()) != std::string::npos);
}

TEST_F(PackedCache, AnUnwritableDirectoryIsOneWarningAndTheLoadGoesOn) {
  // A path below a regular file cannot be created (even by root, unlike a read-only directory).
  write_bytes(root_ / "not-a-dir", {1, 2, 3});
  PackedCacheOptions o = options();
  o.dir = (root_ / "not-a-dir" / "cache").string();
  int packed = 0;
  auto l = load(o, &packed);
  EXPECT_EQ(l->packed.source, PackedSource::Packed);
  EXPECT_EQ(packed, static_cast<int>(l->matrices.size()));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("not-a-dir"), std::string::npos) << warnings_[0];
  EXPECT_EQ(warnings_[0].find('\n'), std::string::npos) << warnings_[0];
  expect_same_packed(*l, *load(PackedCacheOptions{}));
}

TEST_F(PackedCache, TemporariesOfDeadProcessesAreRemovedAndLiveOnesKept) {
  fs::create_directories(cache_);
  const std::string base = cache_file().filename().string();
  const fs::path dead = cache_ / (base + ".tmp.2147483646.0");  // above any pid_max
  const fs::path live = cache_ / (base + ".tmp." + std::to_string(::getppid()) + ".0");
  const fs::path unrelated = cache_ / "0000000000000000.specula-packed.tmp.2147483646.0";
  for (const fs::path& p : {dead, live, unrelated}) write_bytes(p, {0});
  ASSERT_EQ(::kill(2147483646, 0), -1);
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheWritten);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(unrelated));  // another checkpoint's: left to its own loads
}

TEST_F(PackedCache, ConcurrentLoadsLeaveOneValidFile) {
  constexpr int kLoaders = 4;
  std::vector<std::unique_ptr<Loaded>> loaded(kLoaders);
  std::vector<std::thread> threads;
  for (int i = 0; i < kLoaders; ++i) {
    threads.emplace_back([&, i] {
      ThreadPool pool(1);
      auto l = open_checkpoint(model_);
      l->packed = load_packed_weights(l->checkpoint->store, l->matrices, options(), pool);
      loaded[static_cast<size_t>(i)] = std::move(l);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& l : loaded) {
    EXPECT_TRUE(l->packed.source == PackedSource::CacheWritten || l->packed.source == PackedSource::CacheHit)
        << packed_source_name(l->packed.source);
    expect_same_packed(*loaded[0], *l);
  }
  EXPECT_EQ(load(options())->packed.source, PackedSource::CacheHit);
  EXPECT_EQ(std::distance(fs::directory_iterator(cache_), fs::directory_iterator()), 1);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(PackedCache, TheKeyNamesTheFilesTheMatricesAndTheLayoutVersion) {
  auto l = open_checkpoint(model_);
  const std::string key = packed_cache_key(l->checkpoint->store, l->matrices);
  ASSERT_FALSE(key.empty());
  for (const std::string& part :
       {std::string("layout ") + std::to_string(kPackedLayoutVersion), fs::canonical(model_).string(),
        std::string("file model.safetensors size "), std::string("file config.json size "), std::string("mtime_ns "),
        std::string("inode "), std::string(".self_attn.q_proj.weight+0"), std::string(".self_attn.q_proj.scales+0"),
        std::string("bits 4 group 64 superblock 0 scale")})
    EXPECT_NE(key.find(part), std::string::npos) << part << "\n" << key;
  EXPECT_EQ(packed_cache_key(l->checkpoint->store, l->matrices), key);  // deterministic
}

// Sets (or unsets, with nullopt) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(PackedCacheDefaultDir, EnvironmentOrder) {
  ScopedEnv choice("SPECULA_PACKED_CACHE", std::nullopt);
  ScopedEnv base("SPECULA_CACHE_DIR", std::nullopt);
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv home("HOME", std::nullopt);
  EXPECT_EQ(default_packed_cache_dir(), "");
  {
    ScopedEnv h("HOME", "/h");
    EXPECT_EQ(default_packed_cache_dir(), "/h/.cache/specula/packed");
    ScopedEnv x("XDG_CACHE_HOME", "/x");
    EXPECT_EQ(default_packed_cache_dir(), "/x/specula/packed");
    ScopedEnv s("SPECULA_CACHE_DIR", "/s");
    EXPECT_EQ(default_packed_cache_dir(), "/s/packed");
    {
      ScopedEnv c("SPECULA_PACKED_CACHE", "/c");
      EXPECT_EQ(default_packed_cache_dir(), "/c");
    }
    ScopedEnv off("SPECULA_PACKED_CACHE", "off");
    EXPECT_EQ(default_packed_cache_dir(), "");
  }
}

// The whole model: fast precision from the cache gives bitwise the logits of in-memory packing.
TEST_F(PackedCache, TargetModelFromTheCacheGivesBitwiseTheSameLogits) {
  TargetOptions o;
  o.precision = Precision::Fast;
  o.packed_cache_dir = cache_.string();
  o.packed_cache_min_bytes = 0;
  TargetOptions plain_options = o;
  plain_options.packed_cache_dir.clear();

  auto plain = TargetModel::load(model_.string(), plain_options);
  auto first = TargetModel::load(model_.string(), o);
  auto second = TargetModel::load(model_.string(), o);
  // Only matrices the fast kernels take on this CPU are packed (kernels/matmul.h).
  bool any_fast = false;
  const auto probe = open_checkpoint(model_);
  for (const WeightMatrix* w : probe->matrices) any_fast |= fast_matmul_supported(*w);
  if (any_fast) {
    EXPECT_EQ(plain->packed_source(), PackedSource::Packed);
    EXPECT_EQ(first->packed_source(), PackedSource::CacheWritten);
    EXPECT_EQ(second->packed_source(), PackedSource::CacheHit);
  } else {
    for (const auto* m : {plain.get(), first.get(), second.get()}) EXPECT_EQ(m->packed_source(), PackedSource::None);
  }
  EXPECT_EQ(TargetModel::load(model_.string())->packed_source(), PackedSource::None);  // exact precision

  const std::vector<int32_t> prompt = {2, 17, 5, 99, 3, 42, 7};
  ForwardRequest all;
  all.rows = OutputRows::All;
  TargetCache c0 = plain->new_cache(), c1 = first->new_cache(), c2 = second->new_cache();
  const ForwardOutput want = plain->forward(c0, prompt, all, pool_);
  const ForwardOutput got1 = first->forward(c1, prompt, all, pool_);
  const ForwardOutput got2 = second->forward(c2, prompt, all, pool_);
  ASSERT_EQ(want.logits.size(), prompt.size() * static_cast<size_t>(want.vocab_size));
  ASSERT_EQ(got1.logits.size(), want.logits.size());
  ASSERT_EQ(got2.logits.size(), want.logits.size());
  EXPECT_EQ(std::memcmp(got1.logits.data(), want.logits.data(), want.logits.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(got2.logits.data(), want.logits.data(), want.logits.size() * sizeof(float)), 0);
  // A few decode steps too (one row at a time: the decode kernels).
  for (int32_t t : {11, 12, 13}) {
    const int32_t one[] = {t};
    const ForwardOutput a = plain->forward(c0, one, {}, pool_);
    const ForwardOutput b = second->forward(c2, one, {}, pool_);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0) << t;
  }
}

}  // namespace
}  // namespace specula
