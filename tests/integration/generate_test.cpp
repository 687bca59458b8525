// Greedy generation: stops at the EOS set (config eos ∪ generation_config eos), never emits the
// EOS token, honours ignore_eos and max_tokens, and equals the golden greedy continuation.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "specula/io/config.h"
#include "specula/model/generate.h"
#include "specula/model/target_model.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

const std::string kCase = std::string(SPECULA_TEST_DATA) + "/goldens/dense-q6g128-mlx";

TEST(Generate, StopsAtGenerationConfigEos) {
  const nlohmann::json expected = read_json_file(kCase + "/expected.json");
  const auto prompt = expected.at("prompt").get<std::vector<int32_t>>();
  const auto greedy = expected.at("greedy").get<std::vector<int32_t>>();
  // Pick the first greedy token that is not among the earlier ones as an extra EOS id.
  size_t stop = 1;
  while (stop < greedy.size() && std::find(greedy.begin(), greedy.begin() + static_cast<long>(stop), greedy[stop]) !=
                                     greedy.begin() + static_cast<long>(stop))
    ++stop;
  ASSERT_LT(stop, greedy.size());

  const fs::path dir = fs::temp_directory_path() / ("specula_eos_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(fs::path(kCase) / "model" / f, dir / f, fs::copy_options::overwrite_existing);
  std::ofstream(dir / "generation_config.json") << nlohmann::json{{"eos_token_id", {greedy[stop], 1}}}.dump();

  auto model = TargetModel::load(dir.string());
  const std::vector<int32_t> eos = model->eos_token_ids();
  EXPECT_NE(std::find(eos.begin(), eos.end(), greedy[stop]), eos.end());
  EXPECT_NE(std::find(eos.begin(), eos.end(), 106), eos.end());  // from config.json
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  GenerateOptions g;
  g.max_tokens = 24;
  GenerateResult r = generate_greedy(*model, cache, prompt, g, pool);
  EXPECT_EQ(r.stop_reason, "eos");
  EXPECT_EQ(r.tokens, std::vector<int32_t>(greedy.begin(), greedy.begin() + static_cast<long>(stop)));

  g.ignore_eos = true;
  r = generate_greedy(*model, cache, prompt, g, pool);
  EXPECT_EQ(r.stop_reason, "max_tokens");
  EXPECT_EQ(r.tokens, greedy);
  EXPECT_EQ(r.stats.generated_tokens, 24);
  EXPECT_EQ(r.stats.prompt_tokens, static_cast<int64_t>(prompt.size()));

  g.max_tokens = 5;
  r = generate_greedy(*model, cache, prompt, g, pool);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(greedy.begin(), greedy.begin() + 5));
  // The callback can stop early.
  g.max_tokens = 24;
  r = generate_greedy(*model, cache, prompt, g, pool, [](int32_t) { return false; });
  EXPECT_EQ(r.stop_reason, "callback");
  EXPECT_EQ(r.tokens.size(), 1u);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace specula
