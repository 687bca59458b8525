// Replays every input of the fuzz seed corpora (fuzz/corpus/<target>/) and of the crash
// regressions (fuzz/regressions/<target>/) through the same entry functions the libFuzzer targets
// call, so the normal g++ build (and the sanitizer builds) keep every fixed crash fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_entries.h"

namespace {

namespace fs = std::filesystem;
using Entry = int (*)(const uint8_t*, size_t);

struct Target {
  const char* name;
  Entry entry;
};

const Target kTargets[] = {
    {"safetensors", specula::fuzz::fuzz_safetensors},
    {"config_json", specula::fuzz::fuzz_config_json},
    {"tokenizer_json", specula::fuzz::fuzz_tokenizer_json},
    {"tokenizer_codec", specula::fuzz::fuzz_tokenizer_codec},
    {"chat_template", specula::fuzz::fuzz_chat_template},
    {"tool_calls", specula::fuzz::fuzz_tool_calls},
    {"checkpoint_dir", specula::fuzz::fuzz_checkpoint_dir},
    {"openai_request", specula::fuzz::fuzz_openai_request},
    {"gguf", specula::fuzz::fuzz_gguf},
    {"gguf_checkpoint", specula::fuzz::fuzz_gguf_checkpoint},
    {"grammar", specula::fuzz::fuzz_grammar},
    {"tool_call_grammar", specula::fuzz::fuzz_tool_call_grammar},
    {"cache_entry", specula::fuzz::fuzz_cache_entry},
};

std::vector<fs::path> inputs(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

size_t replay(const Target& t, const char* kind) {
  size_t n = 0;
  for (const fs::path& file : inputs(fs::path(SPECULA_FUZZ_DIR) / kind / t.name)) {
    SCOPED_TRACE(file.string());
    const std::string bytes = read_bytes(file);
    EXPECT_NO_THROW(t.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) << file;
    ++n;
  }
  return n;
}

class FuzzReplay : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzReplay, SeedCorpusRunsClean) {
  // Every target ships a seed corpus; an empty one means the corpus went missing.
  EXPECT_GT(replay(GetParam(), "corpus"), 0u) << "no seed inputs in fuzz/corpus/" << GetParam().name;
}

TEST_P(FuzzReplay, CrashRegressionsRunClean) { replay(GetParam(), "regressions"); }

TEST_P(FuzzReplay, EmptyAndTinyInputsRunClean) {
  const uint8_t bytes[] = {0, 1, 2, 3, '{', '}', 0xff};
  for (size_t n = 0; n <= sizeof(bytes); ++n) EXPECT_NO_THROW(GetParam().entry(bytes, n)) << n;
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn(kTargets),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
