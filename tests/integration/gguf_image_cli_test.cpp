// The GGUF image cache through the real `specula run` (model/gguf_image_cache.h): on a synthetic
// Q4_0 GGUF whose large vocabulary puts the file just over the 64 MiB threshold, the first run
// converts the file into <packed cache>/gguf/, the second maps that image (in exact and fast
// precision alike), and both give the tokens of a run with SPECULA_PACKED_CACHE=off, which
// converts in memory and writes nothing. `inspect` describes the file without converting it: the
// .gguf file's size on disk, the image's size, and no image written until a command converts it.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;

using specula::test::CliResult;
using specula::test::run_cli;
using specula::test::run_shell;

class GgufImageCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "specula-gguf-image-cli-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // hidden 128, Q4_0: 72 bytes per vocabulary row of the tied embedding, ~69 MiB for 1M rows.
    const CliResult r =
        run_cli("synth --preset tiny-kveq --format gguf --quant q4_0 --vocab 1000000 --out " + model(), true);
    ASSERT_EQ(r.code, 0) << r.out;
    ASSERT_GT(fs::file_size(model()), uint64_t{64} << 20);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string model() { return dir_ + "/model.gguf"; }

  // `specula run --json` with the given environment assignments; returns the parsed output.
  static nlohmann::json run_json(const std::string& env, const std::string& precision) {
    const CliResult r = run_shell("env " + env + " " + SPECULA_BINARY + " run --model " + model() +
                                  " --tokens 2,17,5,99 --max-tokens 3 --ignore-eos --json --threads 1 --precision " +
                                  precision + " 2>/dev/null");
    EXPECT_EQ(r.code, 0) << env << "\n" << r.out;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }
  static std::string image(const nlohmann::json& j) { return j.value("/stats/gguf_image"_json_pointer, ""); }

  static std::string dir_;
};

std::string GgufImageCli::dir_;

TEST_F(GgufImageCli, FirstRunConvertsIntoTheCacheLaterRunsMapItSameTokens) {
  const std::string cache = dir_ + "/cache";
  for (const std::string precision : {"exact", "fast"}) {
    SCOPED_TRACE(precision);
    const nlohmann::json off = run_json("SPECULA_PACKED_CACHE=off", precision);
    const nlohmann::json first = run_json("SPECULA_PACKED_CACHE=" + cache, precision);
    const nlohmann::json second = run_json("SPECULA_PACKED_CACHE=" + cache, precision);
    ASSERT_TRUE(off.contains("tokens"));
    EXPECT_EQ(image(off), "in memory");
    EXPECT_EQ(image(first), precision == "exact" ? "cache written" : "cache hit");  // exact ran first
    EXPECT_EQ(image(second), "cache hit");
    EXPECT_EQ(first.at("tokens"), off.at("tokens"));
    EXPECT_EQ(second.at("tokens"), off.at("tokens"));
  }
  size_t images = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache + "/gguf"))
    images += e.path().filename() == "model.safetensors";
  EXPECT_EQ(images, 1u);
}

TEST_F(GgufImageCli, InspectDescribesTheFileWithoutConvertingIt) {
  const std::string cache = dir_ + "/inspect-cache";
  const auto inspect = [&](const std::string& flags) {
    const CliResult r = run_shell("env SPECULA_PACKED_CACHE=" + cache + " " + SPECULA_BINARY + " inspect " + model() +
                                  flags + " 2>/dev/null");
    EXPECT_EQ(r.code, 0) << flags << "\n" << r.out;
    return r.out;
  };
  const uint64_t file_bytes = fs::file_size(model());
  const nlohmann::json described = nlohmann::json::parse(inspect(" --json"));
  EXPECT_EQ(described.at("bytes_on_disk").get<uint64_t>(), file_bytes);
  const nlohmann::json& image = described.at("gguf_image");
  EXPECT_EQ(image.at("cached"), false);
  EXPECT_GT(image.at("bytes").get<uint64_t>(), file_bytes);  // Q4_0's f16 bias is stored beside its scale
  EXPECT_FALSE(fs::exists(cache + "/gguf")) << "inspect converted the file";
  const uint64_t per_token = described.at("bytes_per_token").get<uint64_t>();
  EXPECT_GT(per_token, 0u);

  const std::string text = inspect("");
  EXPECT_NE(text.find(fmt::format("on disk ({} bytes, the .gguf file)", file_bytes)), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("({} bytes; tensors", image.at("bytes").get<uint64_t>())), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("of weights streamed ({} bytes)", per_token)), std::string::npos) << text;

  // --check reads every value: the file is converted, and cached, as by every other command.
  const nlohmann::json checked = nlohmann::json::parse(inspect(" --check --json"));
  EXPECT_TRUE(checked.at("value_check").at("target").at("non_finite").empty());
  EXPECT_EQ(checked.at("gguf_image").at("cached"), true);
  const nlohmann::json hit = nlohmann::json::parse(inspect(" --json"));
  EXPECT_EQ(hit.at("gguf_image").at("cached"), true);
  EXPECT_EQ(hit.at("gguf_image").at("file").get<std::string>().rfind(cache + "/gguf/", 0), 0u) << hit.dump();
  for (const nlohmann::json* j : {&checked, &hit}) {
    EXPECT_EQ(j->at("bytes_on_disk"), described.at("bytes_on_disk"));
    EXPECT_EQ(j->at("gguf_image").at("bytes"), image.at("bytes"));
    EXPECT_EQ(j->at("bytes_per_token"), described.at("bytes_per_token"));
    EXPECT_EQ(j->at("bytes_per_token_exact"), described.at("bytes_per_token_exact"));
  }
}

}  // namespace
