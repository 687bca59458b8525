// The `superblock` quantization key (io/config.h): a checkpoint that claims shared factors its
// scales do not have loads in exact precision and is refused where fast precision packs shared
// factors, with a message naming the promise; a superblock that does not fit the module is refused
// at load.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "specula/kernels/isa.h"
#include "temp_dir.h"

namespace specula {
namespace {

using specula::test::run_cli;
using specula::test::run_shell;

// A tiny MLX 4-bit group-32 checkpoint whose config claims `superblock` for every module.
std::string claiming_checkpoint(const test::ScopedTempDir& tmp, int superblock) {
  const std::string dir = tmp.file("model-" + std::to_string(superblock));
  EXPECT_EQ(run_cli("synth --preset tiny-dense --bits 4 --group-size 32 --out " + dir).code, 0);
  const std::string config = dir + "/config.json";
  nlohmann::json c = nlohmann::json::parse(std::ifstream(config));
  c["quantization"]["superblock"] = superblock;
  std::ofstream(config) << c.dump();
  return dir;
}

// Fast precision packs shared factors only for the AVX-512 VNNI kernels (shared_factors_pay), so
// there the broken claim is an error; with the AVX2 kernels the matrix is packed per group and runs.
TEST(SharedFactorsCli, ABrokenPromiseFailsWhereFastPrecisionUsesIt) {
  const test::ScopedTempDir tmp("specula-shared-factors");
  const std::string model = claiming_checkpoint(tmp, 64);
  const std::string run = "run --model " + model + " --tokens 2,3 --max-tokens 2 --threads 1 --precision ";
  EXPECT_EQ(run_cli(run + "exact").code, 0);
  if (detected_isa() == Isa::Avx512 && cpu_features().avx512vnni) {
    const auto fast = run_cli(run + "fast", /*merge_stderr=*/true);
    EXPECT_EQ(fast.code, 1);
    EXPECT_NE(fast.out.find("are not one f32 factor times int8 multipliers, as its superblock 64 promised"),
              std::string::npos)
        << fast.out;
  }
  if (detected_isa() >= Isa::Avx2) {
    const auto avx2 =
        run_shell(std::string("SPECULA_PACKED_CACHE=off SPECULA_ISA=avx2 ") + SPECULA_BINARY + " " + run + "fast 2>&1");
    EXPECT_EQ(avx2.code, 0) << avx2.out;
  }
}

TEST(SharedFactorsCli, ASuperblockThatDoesNotFitIsRefusedAtLoad) {
  const test::ScopedTempDir tmp("specula-shared-factors");
  const auto r = run_cli("run --model " + claiming_checkpoint(tmp, 96) + " --tokens 2 --max-tokens 1 --threads 1",
                         /*merge_stderr=*/true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("superblock 96 is not a multiple of the group size 32 that divides the input width 64"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace specula
