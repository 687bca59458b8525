// `specula demo` through the real binary: the first run creates the synthetic pair in the given
// cache directory (atomically: no temporary directory is left), streams plain and speculative
// decoding and finds them identical; the second run reuses the cached pair without creating it.
#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;

using Result = specula::test::CliResult;
using specula::test::run_cli;

class DemoCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "specula-demo-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(DemoCli, CreatesThePairOnceAndFindsTheOutputsIdentical) {
  const std::string args = "demo --cache-dir " + dir_ + "/cache --max-tokens 12 --threads 1";
  const Result first = run_cli(args, true);
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("creating the demo models"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("meaningless"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("--- plain decoding ---"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("--- speculative decoding"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("outputs identical: yes"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("speedup:"), std::string::npos) << first.out;
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_ + "/cache")) {
    ++entries;
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
    EXPECT_TRUE(fs::exists(e.path() / "model" / "tokenizer.json"));
    EXPECT_TRUE(fs::exists(e.path() / "drafter" / "config.json"));
  }
  EXPECT_EQ(entries, 1);

  const Result second = run_cli(args, true);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_EQ(second.out.find("creating the demo models"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("outputs identical: yes"), std::string::npos) << second.out;
}

TEST_F(DemoCli, LeftoversOfAnInterruptedRunAreReplacedAndUsageIsChecked) {
  // A temporary directory of an interrupted first run, and no completed pair.
  fs::create_directories(dir_ + "/cache/tiny-dense-gemma4-v1.tmp-abcdef/model");
  const Result r = run_cli("demo --cache-dir " + dir_ + "/cache --max-tokens 4 --threads 1", true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("outputs identical: yes"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ + "/cache/tiny-dense-gemma4-v1.tmp-abcdef"));

  // Given checkpoints (here the cached pair itself): no synthetic-weights note.
  const std::string pair = dir_ + "/cache/tiny-dense-gemma4-v1";
  const Result given =
      run_cli("demo --model " + pair + "/model --draft " + pair + "/drafter --max-tokens 4 --threads 1", true);
  ASSERT_EQ(given.code, 0) << given.out;
  EXPECT_NE(given.out.find("outputs identical: yes"), std::string::npos) << given.out;
  EXPECT_EQ(given.out.find("SYNTHETIC"), std::string::npos) << given.out;

  EXPECT_EQ(run_cli("demo --model " + pair + "/model", true).code, 2);  // --model needs --draft
  const Result bad_tok = run_cli("demo --cache-dir " + dir_ + "/other --tokenizer " + dir_ + "/nowhere", true);
  EXPECT_EQ(bad_tok.code, 1);
  EXPECT_NE(bad_tok.out.find("--tokenizer"), std::string::npos) << bad_tok.out;
}

}  // namespace
