// specula's own quantization keys (io/config.h), promises a converted GGUF image makes: a
// checkpoint that claims shared factors its scales do not have (`superblock`), or narrower codes
// than it stores (`code_bits`), runs in exact precision and is refused where fast precision relies
// on the claim, with a message naming the promise; a claim that does not fit the module is refused
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

// A tiny MLX checkpoint of `bits`-bit groups of 32 (random codes over every value) whose config
// claims `key` = `value` for every module.
std::string claiming_checkpoint(const test::ScopedTempDir& tmp, int bits, const std::string& key, int value) {
  const std::string dir = tmp.file("model-" + key + "-" + std::to_string(value));
  EXPECT_EQ(run_cli("synth --preset tiny-dense --bits " + std::to_string(bits) + " --group-size 32 --out " + dir).code,
            0);
  const std::string config = dir + "/config.json";
  nlohmann::json c = nlohmann::json::parse(std::ifstream(config));
  c["quantization"][key] = value;
  std::ofstream(config) << c.dump();
  return dir;
}

// Runs `run` in exact precision (it must pass), in fast precision where `fast_relies` (it must fail
// with `message`), and in fast precision on the AVX2 kernels, which rely on neither claim.
void expect_refused_where_fast_precision_relies(const std::string& run, bool fast_relies, const std::string& message) {
  EXPECT_EQ(run_cli(run + "exact").code, 0);
  if (fast_relies) {
    const auto fast = run_cli(run + "fast", /*merge_stderr=*/true);
    EXPECT_EQ(fast.code, 1);
    EXPECT_NE(fast.out.find(message), std::string::npos) << fast.out;
  }
  if (detected_isa() >= Isa::Avx2) {
    const auto avx2 =
        run_shell(std::string("SPECULA_PACKED_CACHE=off SPECULA_ISA=avx2 ") + SPECULA_BINARY + " " + run + "fast 2>&1");
    EXPECT_EQ(avx2.code, 0) << avx2.out;
  }
}

bool avx512_vnni() { return detected_isa() == Isa::Avx512 && cpu_features().avx512vnni; }

// Fast precision packs shared factors only for the AVX-512 VNNI kernels (shared_factors_pay), so
// there the broken claim is an error; with the AVX2 kernels the matrix is packed per group and runs.
TEST(QuantPromisesCli, ABrokenSuperblockFailsWhereFastPrecisionUsesIt) {
  const test::ScopedTempDir tmp("specula-quant-promises");
  const std::string model = claiming_checkpoint(tmp, 4, "superblock", 64);
  expect_refused_where_fast_precision_relies(
      "run --model " + model + " --tokens 2,3 --max-tokens 2 --threads 1 --precision ", avx512_vnni(),
      "are not one f32 factor times int8 multipliers, as its superblock 64 promised");
}

// Fast precision holds 6-bit codes as such only on the AVX-512 VNNI kernels (six_bit_codes_pay);
// the AVX2 kernels read the codes as 8-bit.
TEST(QuantPromisesCli, BrokenCodeBitsFailWhereFastPrecisionUsesThem) {
  const test::ScopedTempDir tmp("specula-quant-promises");
  const std::string model = claiming_checkpoint(tmp, 8, "code_bits", 6);
  expect_refused_where_fast_precision_relies(
      "run --model " + model + " --tokens 2,3 --max-tokens 2 --threads 1 --precision ", avx512_vnni(),
      "does not fit in 6 bits, as its code_bits 6 promised");
}

TEST(QuantPromisesCli, ASuperblockThatDoesNotFitIsRefusedAtLoad) {
  const test::ScopedTempDir tmp("specula-quant-promises");
  const auto r =
      run_cli("run --model " + claiming_checkpoint(tmp, 4, "superblock", 96) + " --tokens 2 --max-tokens 1 --threads 1",
              /*merge_stderr=*/true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("superblock 96 is not a multiple of the group size 32 that divides the input width 64"),
            std::string::npos)
      << r.out;
}

TEST(QuantPromisesCli, CodeBitsAsWideAsTheCodesAreRefusedAtLoad) {
  const test::ScopedTempDir tmp("specula-quant-promises");
  const auto r =
      run_cli("run --model " + claiming_checkpoint(tmp, 8, "code_bits", 8) + " --tokens 2 --max-tokens 1 --threads 1",
              /*merge_stderr=*/true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("code_bits 8 must be at least 2 and fewer than its 8 bits"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace specula
