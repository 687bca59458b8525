// Assistant drafters as GGUF files (`gemma4-assistant`, llama.cpp's layout): the written layout,
// the round trip into the same DrafterCheckpoint, and hostile or misplaced files, each refused with
// its own message naming the file and the GGUF key or tensor.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "specula/io/checkpoint.h"
#include "specula/io/config.h"
#include "specula/io/gguf.h"
#include "specula/io/gguf_config.h"
#include "specula/io/gguf_names.h"
#include "specula/io/gguf_writer.h"
#include "specula/model/gguf_target.h"
#include "specula/synth/gguf_export.h"
#include "temp_dir.h"

namespace specula {
namespace {

using test::error_of;
using test::ScopedTempDir;

std::string golden(const std::string& name) { return std::string(SPECULA_TEST_DATA) + "/goldens/" + name; }

TEST(GgufNames, DrafterProjectionsMapBothWays) {
  EXPECT_EQ(gguf_to_hf_name("nextn.pre_projection.weight", false), "pre_projection.weight");
  EXPECT_EQ(gguf_to_hf_name("nextn.post_projection.weight", false), "post_projection.weight");
  EXPECT_EQ(gguf_to_hf_name("masked_embd_centroids.weight", false), std::nullopt);
  EXPECT_EQ(hf_to_gguf_name("pre_projection.weight"), "nextn.pre_projection.weight");
  EXPECT_EQ(with_gguf_names("drafter x.gguf: post_projection is [1, 2]"),
            "drafter x.gguf: nextn.post_projection is [1, 2]");
}

// The fuzz seed fuzz/corpus/gguf/valid_gemma4_assistant_config.gguf: a 2-layer drafter, h = 8,
// backbone 16, a bool layer pattern and a proportional full-attention RoPE.
TEST(GgufConfig, DrafterMetadataMapsOntoConfigKeys) {
  const GgufFile f = GgufFile::open(std::string(SPECULA_FUZZ_DIR) + "/corpus/gguf/valid_gemma4_assistant_config.gguf");
  const nlohmann::json c = gguf_drafter_config(f);
  EXPECT_EQ(c.at("model_type"), "gemma4_assistant");
  EXPECT_EQ(c.at("backbone_hidden_size"), 16);
  EXPECT_EQ(c.at("use_ordered_embeddings"), false);
  const nlohmann::json& t = c.at("text_config");
  EXPECT_EQ(t.at("hidden_size"), 8);
  EXPECT_EQ(t.at("num_hidden_layers"), 2);
  EXPECT_EQ(t.at("num_kv_shared_layers"), 2);
  EXPECT_EQ(t.at("head_dim"), 4);
  EXPECT_EQ(t.at("global_head_dim"), 8);
  EXPECT_EQ(t.at("layer_types"), nlohmann::json({"sliding_attention", "full_attention"}));
  EXPECT_EQ(t.at("vocab_size"), 4);
  EXPECT_EQ(t.at("rope_parameters").at("full_attention").at("partial_rotary_factor"), 0.5);
  const DrafterConfig parsed = parse_drafter_config(c, f.path());
  EXPECT_EQ(parsed.backbone_hidden_size, 16);
  EXPECT_EQ(parsed.layers.size(), 2u);
  // The target mapping refuses the same file by its architecture.
  EXPECT_NE(error_of([&] { gguf_target_config(f); }).find("this is an assistant drafter"), std::string::npos);
}

// The dense-head golden drafter (4 layers, h = H_b = 128, vocab 512) as a writer the cases edit.
class GgufDrafterFile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    golden_ = new DrafterCheckpoint(load_drafter(golden("dense-densehead-bf16/drafter")));
  }
  static void TearDownTestSuite() {
    delete golden_;
    golden_ = nullptr;
  }
  GgufWriter writer() const { return synth::drafter_gguf_writer(*golden_, {}); }
  std::string write(const GgufWriter& w) {
    const std::string path = dir_.file("drafter.gguf");
    w.write(path);
    return path;
  }
  std::string error_loading(const GgufWriter& w) {
    const std::string path = write(w);
    return error_of([&] { load_gguf_drafter(path); });
  }

  static DrafterCheckpoint* golden_;
  ScopedTempDir dir_{"specula-gguf-drafter"};
};
DrafterCheckpoint* GgufDrafterFile::golden_ = nullptr;

TEST_F(GgufDrafterFile, IsWrittenInLlamaCppsLayout) {
  const GgufFile f = GgufFile::open(write(writer()));
  EXPECT_EQ(f.get_string("general.architecture"), "gemma4-assistant");
  EXPECT_EQ(f.get_int("gemma4-assistant.embedding_length"), 128);
  EXPECT_EQ(f.get_int("gemma4-assistant.embedding_length_out"), 128);
  EXPECT_EQ(f.get_int("gemma4-assistant.nextn_predict_layers"), 4);
  EXPECT_EQ(f.get_int("gemma4-assistant.attention.shared_kv_layers"), 4);
  for (const char* t :
       {"token_embd.weight", "output_norm.weight", "nextn.pre_projection.weight", "nextn.post_projection.weight",
        "rope_freqs.weight", "blk.3.attn_q.weight", "blk.3.attn_q_norm.weight", "blk.0.layer_output_scale.weight"})
    EXPECT_NE(f.find_tensor(t), nullptr) << t;
  EXPECT_EQ(f.find_tensor("blk.0.attn_k.weight"), nullptr);
  // GGUF lists ne0 first: pre_projection [h, 2 H_b] has dims {2 H_b, h}.
  EXPECT_EQ(f.find_tensor("nextn.pre_projection.weight")->dims, (std::vector<int64_t>{256, 128}));
}

TEST_F(GgufDrafterFile, LoadsAsTheSameDrafterWithTheDenseHead) {
  const std::string path = write(writer());
  const DrafterCheckpoint ck = load_gguf_drafter(path);
  EXPECT_EQ(ck.dir, path);
  EXPECT_FALSE(ck.centroid_head);
  EXPECT_EQ(ck.config.backbone_hidden_size, golden_->config.backbone_hidden_size);
  EXPECT_EQ(ck.config.text.hidden_size, golden_->config.text.hidden_size);
  EXPECT_EQ(ck.config.text.layer_types, golden_->config.text.layer_types);
  EXPECT_EQ(ck.config.text.global_head_dim, golden_->config.text.global_head_dim);
  EXPECT_EQ(ck.config.text.sliding_window, golden_->config.text.sliding_window);
  EXPECT_EQ(ck.config.text.rope_full.type, golden_->config.text.rope_full.type);
  EXPECT_EQ(ck.config.text.vocab_size, 512);
  EXPECT_EQ(ck.layers.size(), 4u);
  EXPECT_EQ(ck.pre_projection.shape, (std::vector<int64_t>{128, 256}));
  // A directory holding the one file loads it too.
  EXPECT_EQ(load_any_drafter(dir_.path().string()).config.text.num_hidden_layers, 4);
}

TEST_F(GgufDrafterFile, ACentroidDrafterIsWrittenWithoutItsCentroidHead) {
  const DrafterCheckpoint centroid = load_drafter(golden("dense-bf16-hf/drafter"));
  ASSERT_TRUE(centroid.centroid_head);
  const std::string path = write(synth::drafter_gguf_writer(centroid, {}));
  const GgufFile f = GgufFile::open(path);
  for (const GgufTensor& t : f.tensors()) EXPECT_EQ(t.name.find("masked"), std::string::npos) << t.name;
  EXPECT_FALSE(load_gguf_drafter(path).centroid_head);
}

TEST_F(GgufDrafterFile, ADrafterGivenAsTheTargetIsRefusedByName) {
  const std::string path = write(writer());
  const std::string e = error_of([&] { load_gguf_target(path); });
  EXPECT_NE(e.find(path + ": general.architecture is \"gemma4-assistant\": this is an assistant drafter, not a "
                          "target model; give it as --draft"),
            std::string::npos)
      << e;
}

TEST_F(GgufDrafterFile, ATargetGivenAsTheDrafterIsRefusedByName) {
  const std::string path = dir_.file("target.gguf");
  synth::write_target_gguf(load_target(golden("dense-densehead-bf16/model")), path, {});
  const std::string e = error_of([&] { load_gguf_drafter(path); });
  EXPECT_NE(e.find(path + ": general.architecture is \"gemma4\": this is a target model, not an assistant drafter"),
            std::string::npos)
      << e;
}

TEST_F(GgufDrafterFile, OtherArchitecture) {
  GgufWriter w = writer();
  w.set_string("general.architecture", "llama");
  EXPECT_NE(error_loading(w).find("general.architecture is \"llama\" but a Gemma 4 drafter is \"gemma4-assistant\""),
            std::string::npos);
}

TEST_F(GgufDrafterFile, MissingBackboneWidth) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_key("gemma4-assistant.embedding_length_out"));
  const std::string e = error_loading(w);
  EXPECT_NE(e.find("drafter.gguf: metadata key 'gemma4-assistant.embedding_length_out' is missing"), std::string::npos)
      << e;
}

TEST_F(GgufDrafterFile, LayersWithTheirOwnKvCache) {
  GgufWriter w = writer();
  w.set_u32("gemma4-assistant.attention.shared_kv_layers", 2);
  EXPECT_NE(error_loading(w).find("'gemma4-assistant.attention.shared_kv_layers' = 2 must equal "
                                  "'gemma4-assistant.block_count' = 4: a drafter owns no KV cache"),
            std::string::npos);
}

TEST_F(GgufDrafterFile, NotEveryLayerADraftLayer) {
  GgufWriter w = writer();
  w.set_u32("gemma4-assistant.nextn_predict_layers", 1);
  EXPECT_NE(error_loading(w).find("'gemma4-assistant.nextn_predict_layers' = 1 but every one of the"),
            std::string::npos);
}

TEST_F(GgufDrafterFile, Experts) {
  GgufWriter w = writer();
  w.set_u32("gemma4-assistant.expert_count", 4);
  w.set_u32("gemma4-assistant.expert_used_count", 2);
  w.set_u32("gemma4-assistant.expert_feed_forward_length", 64);
  EXPECT_NE(error_loading(w).find("'gemma4-assistant.expert_count' is 4: MoE drafters are not supported"),
            std::string::npos);
}

TEST_F(GgufDrafterFile, MissingProjection) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_tensor("nextn.pre_projection.weight"));
  const std::string e = error_loading(w);
  EXPECT_NE(e.find("missing tensor nextn.pre_projection.weight"), std::string::npos) << e;
  EXPECT_NE(e.find(dir_.file("drafter.gguf")), std::string::npos) << e;
}

TEST_F(GgufDrafterFile, ProjectionOfTheWrongWidth) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_tensor("nextn.post_projection.weight"));
  w.add_tensor("nextn.post_projection.weight", GgmlType::F32, {128, 64}, std::vector<std::byte>(128 * 64 * 4));
  const std::string e = error_loading(w);
  EXPECT_NE(e.find("nextn.post_projection.weight has shape [64, 128]"), std::string::npos) << e;
}

TEST_F(GgufDrafterFile, MissingLayerTensor) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_tensor("blk.2.attn_q_norm.weight"));
  const std::string e = error_loading(w);
  EXPECT_NE(e.find("missing tensor blk.2.attn_q_norm.weight"), std::string::npos) << e;
}

}  // namespace
}  // namespace specula
