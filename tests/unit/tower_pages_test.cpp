// A multimodal checkpoint's vision and audio towers are never read by text generation
// (docs/gemma4.md §3.4): after loading a tiny-e4b written with --with-towers and running a forward
// pass, the pages inside the towers' largest tensor are still not mapped in, while the text
// model's are. The single-.safetensors-file form of the same checkpoint generates the same tokens.
#include <gtest/gtest.h>
#include <cstdint>
#include <string>
#include <vector>

#include "page_residency.h"
#include "specula/io/checkpoint.h"
#include "specula/model/target_model.h"
#include "specula/synth/plan.h"
#include "specula/synth/writer.h"
#include "specula/util/thread_pool.h"
#include "temp_dir.h"

namespace specula {
namespace {

class TowerCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new test::ScopedTempDir("specula-tower-pages");
    dir_ = scratch_->path().string();
    synth::SynthOptions o;
    o.preset = "tiny-e4b";
    o.naming = synth::Naming::Hf;
    o.with_towers = true;
    synth::write_checkpoint(synth::plan_target(o), dir_);
  }
  static void TearDownTestSuite() {
    delete scratch_;
    scratch_ = nullptr;
  }
  static std::vector<int32_t> greedy(const TargetModel& model, int steps) {
    ThreadPool pool(1);
    TargetCache cache = model.new_cache();
    std::vector<int32_t> tokens = {2, 17, 301, 45};
    ForwardOutput out = model.forward(cache, tokens, ForwardRequest{}, pool);
    std::vector<int32_t> generated;
    for (int i = 0; i < steps; ++i) {
      const float* row = out.logits_row(0);
      int32_t best = 0;
      for (int64_t v = 1; v < out.vocab_size; ++v)
        if (row[v] > row[best]) best = static_cast<int32_t>(v);
      generated.push_back(best);
      const int32_t next[] = {best};
      out = model.forward(cache, next, ForwardRequest{}, pool);
    }
    return generated;
  }
  static inline test::ScopedTempDir* scratch_ = nullptr;
  static inline std::string dir_;
};

TEST_F(TowerCheckpoint, TextGenerationLeavesTheTowerPagesUntouched) {
  TargetOptions opts;
  opts.precision = Precision::Exact;
  const auto model = TargetModel::load(dir_, opts);
  greedy(*model, 3);
  const TensorStore& store = model->checkpoint().store;
  // 4 MiB: its middle page lies 2 MiB or more from any other tensor, out of the kernel's
  // fault-around window of a neighbour's page and of a 2 MiB page-cache folio mapped whole.
  const TensorView& table = store.get("model.vision_tower.patch_embedder.position_embedding_table");
  ASSERT_GE(table.nbytes, 4u << 20);
  EXPECT_FALSE(page_present(table.data + table.nbytes / 2));
  const TensorView& embed = *model->checkpoint().embed_tokens.weight;  // the tied head reads all of it
  EXPECT_TRUE(page_present(embed.data + embed.nbytes / 2));
}

TEST_F(TowerCheckpoint, SingleWeightFileGeneratesTheSameTokens) {
  TargetOptions opts;
  opts.precision = Precision::Exact;
  const auto from_dir = TargetModel::load(dir_, opts);
  const auto from_file = TargetModel::load(dir_ + "/model.safetensors", opts);
  EXPECT_EQ(from_file->checkpoint().dir, dir_);
  EXPECT_EQ(greedy(*from_file, 4), greedy(*from_dir, 4));
}

}  // namespace
}  // namespace specula
