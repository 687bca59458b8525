// The cache inventory (model/cache_inventory.h) over real entries: a packed-weight file written by
// a load of a copy of a tiny 4-bit golden checkpoint, GGUF image folders committed for small files,
// and temporaries of a dead and of this (running) process. Each entry is listed with its source
// and the state a load would find; prune removes exactly the entries no load will use again, and
// --all everything but what is being written. Also `specula cache` and `specula cache prune`.
#include "specula/model/cache_inventory.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "specula/io/checkpoint.h"
#include "specula/kernels/matmul.h"
#include "specula/model/gguf_image_cache.h"
#include "specula/model/packed_cache.h"
#include "specula/model/target_weights.h"
#include "temp_dir.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenModel = fs::path(SPECULA_TEST_DATA) / "goldens" / "e4b-like-q4g64-mlx" / "model";

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

class CacheInventory : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = tmp_.path() / "model";
    cache_ = tmp_.path() / "cache";
    fs::copy(kGoldenModel, model_, fs::copy_options::recursive);
  }

  // Loads the checkpoint's packable matrices through the packed cache: writes its file.
  void write_packed_entry() {
    TargetCheckpoint checkpoint = load_target(model_.string());
    TargetWeights weights = make_target_weights(checkpoint);
    std::vector<WeightMatrix*> matrices;
    for (WeightMatrix* w : weights.matmul_matrices())
      if (packable(*w)) matrices.push_back(w);
    PackedCacheOptions o;
    o.dir = cache_.string();
    o.min_bytes = 0;
    ThreadPool pool(1);
    const PackedWeights p = load_packed_weights(checkpoint.store, matrices, o, pool);
    ASSERT_EQ(p.source, PackedSource::CacheWritten);
  }

  // A GGUF image entry for `file` (any file: the entry's identity is the file's path and stat).
  void write_gguf_entry(const fs::path& file) {
    const GgufImageEntry e = gguf_image_entry(gguf_image_cache_dir(cache_.string()), file.string());
    const std::string temp = gguf_image_temp_path(e);
    write_text(temp, "image bytes");
    commit_gguf_image(e, temp, nlohmann::json::object());
  }

  const CacheEntry* find(const std::vector<CacheEntry>& entries, CacheEntryKind kind, const std::string& source) {
    for (const CacheEntry& e : entries)
      if (e.kind == kind && e.source == source) return &e;
    return nullptr;
  }

  test::ScopedTempDir tmp_{"specula-cache-inventory"};
  fs::path model_, cache_;
};

TEST_F(CacheInventory, AMissingDirectoryHasNoEntries) {
  EXPECT_TRUE(list_cache((tmp_.path() / "none").string()).empty());
  EXPECT_TRUE(list_cache("").empty());
  EXPECT_TRUE(prune_cache((tmp_.path() / "none").string(), true).empty());
}

TEST_F(CacheInventory, EntriesAreListedWithTheirSourceAndState) {
  write_packed_entry();
  const fs::path kept = tmp_.path() / "kept.gguf", changed = tmp_.path() / "changed.gguf",
                 gone = tmp_.path() / "gone.gguf";
  for (const fs::path& f : {kept, changed, gone}) {
    write_text(f, "GGUF");
    write_gguf_entry(f);
  }
  write_text(changed, "GGUF, rewritten");
  fs::remove(gone);
  std::vector<CacheEntry> entries = list_cache(cache_.string());
  ASSERT_EQ(entries.size(), 4u);
  const CacheEntry* packed = find(entries, CacheEntryKind::PackedWeights, fs::absolute(model_).string());
  ASSERT_NE(packed, nullptr);
  EXPECT_EQ(packed->state, CacheEntryState::Current);
  EXPECT_EQ(packed->path, packed_cache_file(cache_.string(), model_.string()));
  EXPECT_GT(packed->bytes, 0u);
  EXPECT_EQ(find(entries, CacheEntryKind::GgufImage, kept.string())->state, CacheEntryState::Current);
  EXPECT_EQ(find(entries, CacheEntryKind::GgufImage, changed.string())->state, CacheEntryState::Stale);
  EXPECT_EQ(find(entries, CacheEntryKind::GgufImage, gone.string())->state, CacheEntryState::SourceMissing);

  // A weight file of the checkpoint changes: the packed file is stale; the checkpoint goes: missing.
  write_text(model_ / "config.json.extra", "not an identity file");
  EXPECT_EQ(find(list_cache(cache_.string()), CacheEntryKind::PackedWeights, packed->source)->state,
            CacheEntryState::Current);
  fs::last_write_time(model_ / "config.json", fs::last_write_time(model_ / "config.json") + std::chrono::seconds(5));
  entries = list_cache(cache_.string());
  const std::string source = fs::absolute(model_).string();
  EXPECT_EQ(find(entries, CacheEntryKind::PackedWeights, source)->state, CacheEntryState::Stale);
  fs::remove_all(model_);
  EXPECT_EQ(find(list_cache(cache_.string()), CacheEntryKind::PackedWeights, source)->state,
            CacheEntryState::SourceMissing);
}

TEST_F(CacheInventory, DamagedEntriesAndLeftoversArePrunedAndTheRestKept) {
  write_packed_entry();
  const fs::path kept = tmp_.path() / "kept.gguf";
  write_text(kept, "GGUF");
  write_gguf_entry(kept);
  const fs::path foreign = cache_ / "0123456789abcdef.specula-packed";
  write_text(foreign, "not a packed file");
  const fs::path unrelated = cache_ / "notes.txt";  // not an entry: never listed, never removed
  write_text(unrelated, "mine");
  // Temporaries: of a process that does not run (pid far above pid_max), and of this one.
  const fs::path dead = cache_ / "0123456789abcdef.specula-packed.tmp.99999999.0";
  const fs::path live = cache_ / fmt::format("fedcba9876543210.specula-packed.tmp.{}.0", ::getpid());
  write_text(dead, "partial");
  write_text(live, "partial");
  // A GGUF folder a running process is converting into (no image.json yet): in use.
  const fs::path writing = gguf_image_cache_dir(cache_.string()) / fs::path("00000000000000aa");
  fs::create_directories(writing);
  write_text(writing / fmt::format("model.safetensors.tmp-{}", ::getpid()), "partial");

  std::vector<CacheEntry> entries = list_cache(cache_.string());
  ASSERT_EQ(entries.size(), 6u);
  auto state_of = [&](const fs::path& p) {
    for (const CacheEntry& e : entries)
      if (e.path == p.string()) return e.state;
    ADD_FAILURE() << p << " not listed";
    return CacheEntryState::Current;
  };
  EXPECT_EQ(state_of(foreign), CacheEntryState::Unreadable);
  EXPECT_EQ(state_of(dead), CacheEntryState::Leftover);
  EXPECT_EQ(state_of(live), CacheEntryState::InUse);
  EXPECT_EQ(state_of(writing), CacheEntryState::InUse);

  const std::vector<CacheEntry> removed = prune_cache(cache_.string(), false);
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(foreign));
  EXPECT_FALSE(fs::exists(dead));
  for (const fs::path& p : {live, writing, unrelated, fs::path(packed_cache_file(cache_.string(), model_.string()))})
    EXPECT_TRUE(fs::exists(p)) << p;
  entries = list_cache(cache_.string());
  EXPECT_EQ(entries.size(), 4u);

  // --all: everything but what is being written.
  EXPECT_EQ(prune_cache(cache_.string(), true).size(), 2u);
  entries = list_cache(cache_.string());
  ASSERT_EQ(entries.size(), 2u);
  for (const CacheEntry& e : entries) EXPECT_EQ(e.state, CacheEntryState::InUse);
  EXPECT_TRUE(fs::exists(unrelated));
}

TEST_F(CacheInventory, TheCommandListsAndPrunes) {
  write_packed_entry();
  const fs::path gone = tmp_.path() / "gone.gguf";
  write_text(gone, "GGUF");
  write_gguf_entry(gone);
  fs::remove(gone);
  const std::string env = "SPECULA_PACKED_CACHE=" + cache_.string() + " ";
  const test::CliResult list = test::run_cli_env(env, "cache --json");
  ASSERT_EQ(list.code, 0) << list.out;
  const nlohmann::json j = nlohmann::json::parse(list.out);
  EXPECT_EQ(j.at("dir"), cache_.string());
  ASSERT_EQ(j.at("entries").size(), 2u);
  EXPECT_GT(j.at("prunable_bytes").get<uint64_t>(), 0u);

  const test::CliResult table = test::run_cli_env(env, "cache");
  EXPECT_NE(table.out.find("| source missing | GGUF image |"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("| current | packed weights |"), std::string::npos) << table.out;

  const test::CliResult dry = test::run_cli_env(env, "cache prune --dry-run");
  EXPECT_EQ(dry.code, 0);
  EXPECT_NE(dry.out.find("would remove 1 entries"), std::string::npos) << dry.out;
  EXPECT_EQ(list_cache(cache_.string()).size(), 2u);
  const test::CliResult prune = test::run_cli_env(env, "cache prune --json");
  EXPECT_EQ(nlohmann::json::parse(prune.out).at("removed").size(), 1u) << prune.out;
  EXPECT_EQ(list_cache(cache_.string()).size(), 1u);

  const test::CliResult off = test::run_cli_env("SPECULA_PACKED_CACHE=off ", "cache", /*merge_stderr=*/true);
  EXPECT_EQ(off.code, 1);
  EXPECT_NE(off.out.find("no cache directory"), std::string::npos) << off.out;
}

}  // namespace
}  // namespace specula
