// Error paths of the target model: each bad input is rejected with a message naming the value and
// the limit, before the cache is touched.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "specula/io/config.h"
#include "specula/model/generate.h"
#include "specula/model/target_model.h"
#include "specula/util/error.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

const std::string kModel = std::string(SPECULA_TEST_DATA) + "/goldens/dense-bf16-hf/model";

// Runs f, expects specula::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

TEST(TargetErrors, TokenOutOfRange) {
  auto model = TargetModel::load(kModel);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  const std::vector<int32_t> ids = {2, 5, 512};
  expect_error([&] { model->forward(cache, ids, {}, pool); },
               "token id 512 at index 2 is outside the vocabulary [0, 512)");
  const std::vector<int32_t> neg = {2, -1};
  expect_error([&] { model->forward(cache, neg, {}, pool); }, "token id -1 at index 1");
  EXPECT_EQ(cache.offset(), 0);
}

TEST(TargetErrors, EmptyInput) {
  auto model = TargetModel::load(kModel);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  expect_error([&] { model->forward(cache, std::span<const int32_t>(), {}, pool); }, "no tokens");
  GenerateOptions g;
  expect_error([&] { generate_greedy(*model, cache, std::span<const int32_t>(), g, pool); }, "the prompt is empty");
}

TEST(TargetErrors, ContextLimitConfigured) {
  TargetOptions o;
  o.max_context = 6;
  auto model = TargetModel::load(kModel, o);
  EXPECT_EQ(model->max_context(), 6);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  const std::vector<int32_t> ids = {2, 3, 4, 5};
  model->forward(cache, ids, {}, pool);
  expect_error([&] { model->forward(cache, ids, {}, pool); },
               "context of 8 tokens (4 cached + 4 new) exceeds the limit of 6 (configured limit)");
  EXPECT_EQ(cache.offset(), 4);
  // Generation stops cleanly at the limit instead of failing mid-way.
  GenerateOptions g;
  g.max_tokens = 10;
  g.ignore_eos = true;
  const GenerateResult r = generate_greedy(*model, cache, ids, g, pool);
  EXPECT_EQ(r.stop_reason, "context");
  EXPECT_EQ(r.tokens.size(), 3u);  // positions 4 and 5 fed, 3 tokens produced
}

TEST(TargetErrors, ContextLimitFromConfig) {
  const fs::path dir = fs::temp_directory_path() / ("specula_maxpos_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(kModel) / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  nlohmann::json cfg = read_json_file(kModel + "/config.json");
  cfg["text_config"]["max_position_embeddings"] = 5;
  std::ofstream(dir / "config.json") << cfg.dump();
  auto model = TargetModel::load(dir.string());
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  const std::vector<int32_t> ids = {2, 3, 4, 5, 6, 7};
  expect_error([&] { model->forward(cache, ids, {}, pool); },
               "context of 6 tokens (0 cached + 6 new) exceeds the limit of 5 (max_position_embeddings)");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(TargetErrors, CheckpointDisagreeingWithConfigFailsAtLoad) {
  const fs::path dir = fs::temp_directory_path() / ("specula_badcfg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(kModel) / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  nlohmann::json cfg = read_json_file(kModel + "/config.json");
  cfg["text_config"]["intermediate_size"] = 320;  // tensors say 256
  std::ofstream(dir / "config.json") << cfg.dump();
  try {
    TargetModel::load(dir.string());
    ADD_FAILURE() << "a checkpoint whose MLP tensors disagree with intermediate_size loaded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("mlp"), std::string::npos) << m;
    EXPECT_NE(m.find("256"), std::string::npos) << m;
    EXPECT_NE(m.find("320"), std::string::npos) << m;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(TargetErrors, ChunkAndRowRequests) {
  TargetOptions o;
  o.prefill_chunk = 4;
  auto model = TargetModel::load(kModel, o);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  const std::vector<int32_t> ids = {2, 3, 4, 5, 6};
  ForwardRequest r;
  r.chunk = 5;
  expect_error([&] { model->forward(cache, ids, r, pool); },
               "forward chunk of 5 rows exceeds the cache's maximum chunk of 4");
  r = {};
  r.rows = OutputRows::Selected;
  r.selected = {1, 5};
  expect_error([&] { model->forward(cache, ids, r, pool); }, "requested output row 5 is outside the 5 fed tokens");
  r.selected = {3, 1};
  expect_error([&] { model->forward(cache, ids, r, pool); }, "ascending");
  EXPECT_EQ(cache.offset(), 0);
  // A forward longer than the chunk is split internally and still returns the selected rows.
  r.selected = {0, 4};
  r.hidden = true;
  const ForwardOutput out = model->forward(cache, ids, r, pool);
  EXPECT_EQ(out.rows, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(out.logits.size(), 2u * 512u);
  EXPECT_EQ(out.hidden.size(), 2u * 128u);
  EXPECT_EQ(cache.offset(), 5);
  expect_error([&] { cache.rollback(6); }, "cannot roll back 6 positions, only 5 are cached");
}

TEST(TargetErrors, BadOptions) {
  TargetOptions o;
  o.prefill_chunk = 0;
  expect_error([&] { TargetModel::load(kModel, o); }, "prefill chunk 0 must be >= 1");
}

}  // namespace
}  // namespace specula
