// The `code_bits` quantization key (io/config.h): a checkpoint that claims narrower codes than its
// 8-bit codes are runs in exact precision and is refused where fast precision packs the codes that
// narrow, with a message naming the promise; a claim as wide as the stored codes is refused at load.
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

// A tiny MLX 8-bit checkpoint (random codes over all 256 values) whose config claims `code_bits`.
std::string claiming_checkpoint(const test::ScopedTempDir& tmp, int code_bits) {
  const std::string dir = tmp.file("model-" + std::to_string(code_bits));
  EXPECT_EQ(run_cli("synth --preset tiny-dense --bits 8 --group-size 32 --out " + dir).code, 0);
  const std::string config = dir + "/config.json";
  nlohmann::json c = nlohmann::json::parse(std::ifstream(config));
  c["quantization"]["code_bits"] = code_bits;
  std::ofstream(config) << c.dump();
  return dir;
}

// Fast precision holds 6-bit codes as such only on the AVX-512 VNNI kernels (six_bit_codes_pay), so
// there the broken claim is an error; the AVX2 kernels read the codes as 8-bit and run.
TEST(CodeBitsCli, ABrokenPromiseFailsWhereFastPrecisionUsesIt) {
  const test::ScopedTempDir tmp("specula-code-bits");
  const std::string model = claiming_checkpoint(tmp, 6);
  const std::string run = "run --model " + model + " --tokens 2,3 --max-tokens 2 --threads 1 --precision ";
  EXPECT_EQ(run_cli(run + "exact").code, 0);
  if (detected_isa() == Isa::Avx512 && cpu_features().avx512vnni) {
    const auto fast = run_cli(run + "fast", /*merge_stderr=*/true);
    EXPECT_EQ(fast.code, 1);
    EXPECT_NE(fast.out.find("does not fit in 6 bits, as its code_bits 6 promised"), std::string::npos) << fast.out;
  }
  if (detected_isa() >= Isa::Avx2) {
    const auto avx2 =
        run_shell(std::string("SPECULA_PACKED_CACHE=off SPECULA_ISA=avx2 ") + SPECULA_BINARY + " " + run + "fast 2>&1");
    EXPECT_EQ(avx2.code, 0) << avx2.out;
  }
}

TEST(CodeBitsCli, AClaimAsWideAsTheCodesIsRefusedAtLoad) {
  const test::ScopedTempDir tmp("specula-code-bits");
  const auto r = run_cli("run --model " + claiming_checkpoint(tmp, 8) + " --tokens 2 --max-tokens 1 --threads 1",
                         /*merge_stderr=*/true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("code_bits 8 must be at least 2 and fewer than its 8 bits"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace specula
