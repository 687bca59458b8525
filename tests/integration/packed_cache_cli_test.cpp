// The packed-weight cache through the real `specula run` (model/packed_cache.h): on a synthetic
// 4-bit checkpoint whose large vocabulary puts its packed weights just over the 64 MiB threshold,
// the first fast-precision run writes the cache file into SPECULA_PACKED_CACHE (or the default
// directory under SPECULA_CACHE_DIR), the second maps it, both give the same tokens as a run with
// SPECULA_PACKED_CACHE=off, and an unwritable cache directory is one warning, not a failure.
#include <gtest/gtest.h>

#include <stdlib.h>
#include "cli_runner.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/kernels/isa.h"

namespace {

namespace fs = std::filesystem;

using specula::test::CliResult;
using specula::test::run_cli;
using specula::test::run_shell;

// Whether this CPU runs 4-bit matrices with the fast kernels (then fast precision packs them).
bool packs_4bit() { return specula::active_isa() >= specula::Isa::Avx2; }

size_t count_cache_files(const fs::path& dir) {
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    n += it->path().extension() == ".specula-packed";
  return n;
}

class PackedCacheCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "specula-packed-cli-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // hidden 128, 4-bit g64: the tied LM head packs to 72 bytes per vocabulary row, so 1M rows
    // are ~69 MiB of packed weights, over the CLI's 64 MiB threshold.
    const CliResult r =
        run_cli("synth --preset tiny-kveq --bits 4 --group-size 64 --vocab 1000000 --out " + model(), true);
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string model() { return dir_ + "/model"; }

  // `specula run --json` with the given environment assignments; returns the parsed output.
  static nlohmann::json run_json(const std::string& env, const std::string& extra = "") {
    const CliResult r =
        run_shell("env " + env + " " + SPECULA_BINARY + " run --model " + model() +
                  " --tokens 2,17,5,99 --max-tokens 3 --ignore-eos --json --threads 1 " + extra + " 2>/dev/null");
    EXPECT_EQ(r.code, 0) << env << "\n" << r.out;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }
  static std::string source(const nlohmann::json& j) { return j.value("/stats/packed_weights"_json_pointer, ""); }

  static std::string dir_;
};

std::string PackedCacheCli::dir_;

TEST_F(PackedCacheCli, FirstRunWritesSecondRunMapsSameTokensAsWithoutCache) {
  const std::string cache = dir_ + "/cache-a";
  const nlohmann::json off = run_json("SPECULA_PACKED_CACHE=off");
  const nlohmann::json first = run_json("SPECULA_PACKED_CACHE=" + cache);
  const nlohmann::json second = run_json("SPECULA_PACKED_CACHE=" + cache);
  ASSERT_TRUE(off.contains("tokens"));
  EXPECT_EQ(first.at("tokens"), off.at("tokens"));
  EXPECT_EQ(second.at("tokens"), off.at("tokens"));
  if (packs_4bit()) {
    EXPECT_EQ(source(off), "packed");
    EXPECT_EQ(source(first), "cache written");
    EXPECT_EQ(source(second), "cache hit");
    EXPECT_EQ(count_cache_files(cache), 1u);
  } else {
    for (const auto* j : {&off, &first, &second}) EXPECT_EQ(source(*j), "none");
    EXPECT_EQ(count_cache_files(cache), 0u);
  }
  EXPECT_EQ(source(run_json("SPECULA_PACKED_CACHE=" + cache, "--precision exact")), "none");
}

TEST_F(PackedCacheCli, TheDefaultDirectoryIsUnderSpeculaCacheDir) {
  const std::string base = dir_ + "/base";
  const nlohmann::json j = run_json("-u SPECULA_PACKED_CACHE SPECULA_CACHE_DIR=" + base);
  EXPECT_EQ(count_cache_files(base + "/packed"), packs_4bit() ? 1u : 0u);
  if (packs_4bit()) {
    EXPECT_EQ(source(j), "cache written");
  }
}

TEST_F(PackedCacheCli, TheTextStatsLineNamesTheSource) {
  const std::string cache = dir_ + "/cache-text";
  const std::string cmd = "env SPECULA_PACKED_CACHE=" + cache + " " + SPECULA_BINARY + " run --model " + model() +
                          " --tokens 2,17 --max-tokens 1 --threads 1 2>&1 >/dev/null";
  run_shell(cmd);
  const CliResult r = run_shell(cmd);
  EXPECT_EQ(r.code, 0) << r.out;
  if (packs_4bit()) {
    EXPECT_NE(r.out.find("(packed weights: cache hit)"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(r.out.find("packed weights"), std::string::npos) << r.out;
  }
}

TEST_F(PackedCacheCli, AnUnwritableCacheDirectoryIsOneWarningAndTheRunSucceeds) {
  const std::string file = dir_ + "/a-file";
  std::ofstream(file) << "x";
  const CliResult r = run_shell("env SPECULA_PACKED_CACHE=" + file + "/cache " + SPECULA_BINARY + " run --model " +
                                model() + " --tokens 2,17 --max-tokens 1 --threads 1 --json 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  if (packs_4bit()) {
    const size_t w = r.out.find("specula: warning: packed-weight cache not saved");
    ASSERT_NE(w, std::string::npos) << r.out;
    EXPECT_NE(r.out.find(file), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("warning", r.out.find('\n', w)), std::string::npos) << r.out;  // one line only
    EXPECT_NE(r.out.find("\"packed_weights\":\"packed\""), std::string::npos) << r.out;
  }
}

}  // namespace
