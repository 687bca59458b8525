// GGUF checkpoints as targets: the affine reading of ggml blocks against the reference
// dequantization, the tensor name map, and hostile mapping cases (each with its own message).
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "specula/io/config.h"
#include "specula/io/gguf_config.h"
#include "specula/io/gguf_names.h"
#include "specula/io/gguf_writer.h"
#include "specula/io/weight_files.h"
#include "specula/kernels/ggml_affine.h"
#include "specula/kernels/ggml_quants.h"
#include "specula/kernels/shared_scales.h"
#include "specula/model/gguf_target.h"
#include "specula/synth/gguf_export.h"
#include "temp_dir.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::ScopedTempDir;

std::vector<float> random_row(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST(GgmlAffine, EveryAffineTypeEqualsTheReferenceDequantizationBitForBit) {
  const int64_t n = 512;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    const std::vector<float> x = random_row(n, static_cast<unsigned>(t));
    std::vector<std::byte> blocks(*ggml_row_bytes(t, n));
    quantize_row_ggml(t, x.data(), blocks.data(), n);
    std::vector<float> want(n);
    dequantize_row_ggml(t, blocks.data(), want.data(), n);
    const int bits = ggml_affine_bits(t), group = ggml_affine_group(t);
    ASSERT_GT(bits, 0);
    EXPECT_EQ(group, t == GgmlType::Q6_K ? 16 : 32);
    std::vector<uint8_t> codes(n);
    std::vector<float> scales(n / group), biases(n / group);
    ggml_row_to_affine(t, blocks.data(), n, codes.data(), scales.data(), biases.data());
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_LT(codes[j], t == GgmlType::Q6_K ? 64u : 1u << bits) << j;
      const float got = static_cast<float>(codes[j]) * scales[j / group] + biases[j / group];
      ASSERT_EQ(got, want[j]) << "element " << j;
    }
  }
}

// ggml_scales_share_factors agrees with factoring the converted scales and biases: on random
// K-quant blocks (arbitrary bytes, d and dmin made finite) it says yes and every superblock
// factors; blocks with an infinite d, or a Q6_K block with d = 0 and sub-block scales of both
// signs, get a no, and such a Q6_K block indeed does not factor.
TEST(GgmlAffine, KQuantScalesShareFactorsWhenTheBlocksSaySo) {
  std::mt19937 rng(31);
  const int64_t n = 512;
  const auto factors = [](const std::vector<float>& v, int64_t per) {
    std::vector<int8_t> m(static_cast<size_t>(per));
    float f = 0.0f;
    for (size_t i = 0; i < v.size(); i += static_cast<size_t>(per))
      if (!factor_shared_scale(v.data() + i, static_cast<int>(per), f, m.data())) return false;
    return true;
  };
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    const int64_t group = ggml_affine_group(t), per = 256 / group;
    const size_t block_bytes = ggml_type_size(t);
    const size_t d_at = t == GgmlType::Q6_K ? block_bytes - 2 : 0;  // Q6_K keeps d last, K4/K5 first
    std::vector<std::byte> blocks(*ggml_row_bytes(t, n));
    std::vector<uint8_t> codes(n);
    std::vector<float> scales(n / group), biases(n / group);
    for (int trial = 0; trial < 200; ++trial) {
      for (std::byte& b : blocks) b = static_cast<std::byte>(rng());
      for (size_t at = 0; at < blocks.size(); at += block_bytes) {
        for (size_t h = d_at; h < d_at + (t == GgmlType::Q6_K ? 2u : 4u); h += 2)
          blocks[at + h + 1] &= std::byte{0xbb};  // exponent bits 0x7c00 never all set: finite
      }
      ASSERT_TRUE(ggml_scales_share_factors(t, blocks.data(), n));
      ggml_row_to_affine(t, blocks.data(), n, codes.data(), scales.data(), biases.data());
      ASSERT_TRUE(factors(scales, per) && factors(biases, per)) << "trial " << trial;
    }
    blocks[d_at + 1] |= std::byte{0x7c};  // the first block's d: infinite or NaN
    EXPECT_FALSE(ggml_scales_share_factors(t, blocks.data(), n));
  }
  // Q6_K, d = +0, sub-block scales -1 and +1: zeros of both signs.
  const size_t q6 = ggml_type_size(GgmlType::Q6_K);
  std::vector<std::byte> block(q6, std::byte{0});
  block[192] = std::byte{0xff};  // scales[0] = -1 (scales follow ql[128], qh[64])
  block[193] = std::byte{0x01};
  EXPECT_FALSE(ggml_scales_share_factors(GgmlType::Q6_K, block.data(), 256));
  std::vector<uint8_t> codes(256);
  std::vector<float> scales(16), biases(16);
  ggml_row_to_affine(GgmlType::Q6_K, block.data(), 256, codes.data(), scales.data(), biases.data());
  EXPECT_FALSE(factors(scales, 16));
  block[192] = std::byte{0x02};  // both positive: one sign of zero
  EXPECT_TRUE(ggml_scales_share_factors(GgmlType::Q6_K, block.data(), 256));
}

TEST(GgmlAffine, TypesWithoutAnAffineFormAreRefused) {
  EXPECT_EQ(ggml_affine_bits(GgmlType::Q8_K), 0);
  EXPECT_EQ(ggml_affine_bits(GgmlType::F16), 0);
  std::vector<std::byte> block(292);
  uint8_t codes[256];
  float s[8], b[8];
  EXPECT_NE(error_of([&] { ggml_row_to_affine(GgmlType::Q8_K, block.data(), 256, codes, s, b); }).find("q8_K"),
            std::string::npos);
}

TEST(GgufNames, MapBothWays) {
  EXPECT_EQ(gguf_to_hf_name("token_embd.weight", false), "model.embed_tokens.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.12.attn_q.weight", false), "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.3.layer_output_scale.weight", false), "model.layers.3.layer_scalar");
  EXPECT_EQ(gguf_to_hf_name("blk.0.ffn_down_exps.weight", true), "model.layers.0.experts.down_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.0.ffn_down_exps.weight", false), "model.layers.0.experts.switch_glu.down_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.0.ffn_down_exps.scale", false), "model.layers.0.router.per_expert_scale");
  EXPECT_EQ(gguf_to_hf_name("rope_freqs.weight", false), std::nullopt);
  EXPECT_EQ(gguf_to_hf_name("blk.x.attn_q.weight", false), std::nullopt);
  EXPECT_EQ(hf_to_gguf_name("model.layers.7.mlp.down_proj.weight"), "blk.7.ffn_down.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.7.mlp.down_proj"), "blk.7.ffn_down");
  EXPECT_EQ(hf_to_gguf_name("model.layers.7.mlp.down_proj.scales"), "blk.7.ffn_down.weight");
  EXPECT_EQ(hf_to_gguf_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(with_gguf_names("missing tensor model.layers.1.self_attn.k_proj.weight in x.gguf."),
            "missing tensor blk.1.attn_k.weight in x.gguf.");
}

// The fuzz seed fuzz/corpus/gguf/valid_gemma4_config.gguf: per-layer arrays, a bool layer pattern,
// KV heads per layer type and a proportional RoPE through rope_freqs.
TEST(GgufConfig, MetadataMapsOntoConfigKeys) {
  const GgufFile f = GgufFile::open(std::string(SPECULA_FUZZ_DIR) + "/corpus/gguf/valid_gemma4_config.gguf");
  const nlohmann::json c = gguf_target_config(f);
  EXPECT_EQ(c.at("model_type"), "gemma4_text");
  EXPECT_EQ(c.at("num_hidden_layers"), 4);
  EXPECT_EQ(c.at("hidden_size"), 8);
  EXPECT_EQ(c.at("intermediate_size"), 16);
  EXPECT_EQ(c.at("use_double_wide_mlp"), false);
  EXPECT_EQ(c.at("num_key_value_heads"), 2);
  EXPECT_EQ(c.at("num_global_key_value_heads"), 1);
  EXPECT_EQ(c.at("head_dim"), 4);
  EXPECT_EQ(c.at("global_head_dim"), 8);
  EXPECT_EQ(c.at("layer_types"),
            nlohmann::json({"sliding_attention", "full_attention", "sliding_attention", "full_attention"}));
  EXPECT_EQ(c.at("num_kv_shared_layers"), 2);
  EXPECT_EQ(c.at("vocab_size"), 4);
  EXPECT_EQ(c.at("tie_word_embeddings"), true);
  EXPECT_EQ(c.at("max_position_embeddings"), 64);
  EXPECT_EQ(c.at("final_logit_softcapping"), 30.0);
  const nlohmann::json& full = c.at("rope_parameters").at("full_attention");
  EXPECT_EQ(full.at("rope_type"), "proportional");
  EXPECT_EQ(full.at("partial_rotary_factor"), 0.5);
  EXPECT_EQ(full.at("rope_theta"), 1e6);
  EXPECT_EQ(c.at("rope_parameters").at("sliding_attention").at("rope_theta"), 1e4);
  // The parser accepts what the mapping produced.
  EXPECT_NO_THROW(parse_target_config(c, f.path()));
}

// A small valid GGUF target (the dense golden, f32) as a writer the cases below edit.
class GgufMapping : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    golden_ = new TargetCheckpoint(load_target(std::string(SPECULA_TEST_DATA) + "/goldens/dense-bf16-hf/model"));
  }
  static void TearDownTestSuite() {
    delete golden_;
    golden_ = nullptr;
  }
  GgufWriter writer() const { return synth::target_gguf_writer(*golden_, {}); }
  std::string error_loading(const GgufWriter& w) {
    const std::string path = dir_.file("model.gguf");
    w.write(path);
    return error_of([&] { load_gguf_target(path); });
  }

  static TargetCheckpoint* golden_;
  ScopedTempDir dir_{"specula-gguf-target"};
};
TargetCheckpoint* GgufMapping::golden_ = nullptr;

TEST_F(GgufMapping, TheUneditedFileLoadsAsTheSameModel) {
  const std::string path = dir_.file("model.gguf");
  writer().write(path);
  const TargetCheckpoint ck = load_gguf_target(path);
  EXPECT_EQ(ck.config.text.hidden_size, golden_->config.text.hidden_size);
  EXPECT_EQ(ck.config.text.layer_types, golden_->config.text.layer_types);
  EXPECT_EQ(ck.config.layers.size(), golden_->config.layers.size());
  EXPECT_EQ(ck.config.text.global_head_dim, golden_->config.text.global_head_dim);
  EXPECT_EQ(ck.config.text.rope_full.partial_rotary_factor, golden_->config.text.rope_full.partial_rotary_factor);
  EXPECT_EQ(ck.config.text.final_logit_softcapping, golden_->config.text.final_logit_softcapping);
  EXPECT_EQ(ck.dir, path);
}

TEST_F(GgufMapping, MissingKey) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_key("gemma4.attention.head_count"));
  EXPECT_NE(error_loading(w).find("metadata key 'gemma4.attention.head_count' is missing"), std::string::npos);
}

TEST_F(GgufMapping, WrongArrayLength) {
  GgufWriter w = writer();
  w.set_array<int32_t>("gemma4.attention.head_count_kv", std::vector<int32_t>(7, 2));
  EXPECT_NE(error_loading(w).find("'gemma4.attention.head_count_kv' has 7 entries but 'gemma4.block_count' is 6"),
            std::string::npos);
}

TEST_F(GgufMapping, FeedForwardArrayThatNoLayerRuleGives) {
  GgufWriter w = writer();
  w.set_array<int32_t>("gemma4.feed_forward_length", {256, 256, 256, 512, 256, 256});
  EXPECT_NE(error_loading(w).find("'gemma4.feed_forward_length'[3] = 512 but 256 is expected"), std::string::npos);
}

TEST_F(GgufMapping, KeyAndValueLengthsDisagree) {
  GgufWriter w = writer();
  w.set_u32("gemma4.attention.value_length_swa", 16);
  EXPECT_NE(error_loading(w).find("'gemma4.attention.value_length_swa' = 16 differs from"), std::string::npos);
}

TEST_F(GgufMapping, WrongArchitecture) {
  GgufWriter w = writer();
  w.set_string("general.architecture", "llama");
  EXPECT_NE(error_loading(w).find("general.architecture is \"llama\""), std::string::npos);
}

TEST_F(GgufMapping, MissingTensor) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_tensor("blk.1.attn_q.weight"));
  const std::string e = error_loading(w);
  EXPECT_NE(e.find("missing tensor blk.1.attn_q.weight"), std::string::npos) << e;
}

TEST_F(GgufMapping, WrongShape) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_tensor("blk.2.attn_output.weight"));
  // Layer 2 is a full-attention layer: o_proj is [H, nH * global_head_dim] = [128, 256].
  w.add_tensor("blk.2.attn_output.weight", GgmlType::F32, {128, 128}, std::vector<std::byte>(128 * 128 * 4));
  const std::string e = error_loading(w);
  EXPECT_NE(e.find("blk.2.attn_output.weight has shape [128, 128]"), std::string::npos) << e;
  EXPECT_NE(e.find("(" + dir_.file("model.gguf") + ")"), std::string::npos) << e;  // the file, not the memory image
}

TEST_F(GgufMapping, UnsupportedTensorType) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_tensor("blk.2.ffn_up.weight"));
  const int64_t blocks = 128 / 32 * 256;
  w.add_tensor("blk.2.ffn_up.weight", GgmlType::IQ4_NL, {128, 256},
               std::vector<std::byte>(static_cast<size_t>(blocks) * ggml_type_size(GgmlType::IQ4_NL)));
  EXPECT_NE(error_loading(w).find("tensor blk.2.ffn_up.weight is iq4_nl, which specula cannot load"),
            std::string::npos);
}

TEST_F(GgufMapping, RopeFreqsThatAreNotAProportionalRope) {
  GgufWriter w = writer();
  ASSERT_TRUE(w.remove_tensor("rope_freqs.weight"));
  std::vector<float> v(32, 1.0f);
  v[5] = 2.0f;
  std::vector<std::byte> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  w.add_tensor("rope_freqs.weight", GgmlType::F32, {32}, bytes);
  EXPECT_NE(error_loading(w).find("tensor rope_freqs.weight entry 5 is 2"), std::string::npos);
}

TEST_F(GgufMapping, ADirectoryWithOneGgufLoadsAndOneWithTwoIsRefused) {
  writer().write(dir_.file("a.gguf"));
  EXPECT_EQ(gguf_file_of(dir_.path().string()), dir_.file("a.gguf"));
  EXPECT_EQ(load_any_target(dir_.path().string()).config.text.num_hidden_layers, 6);
  writer().write(dir_.file("b.gguf"));
  EXPECT_NE(error_of([&] { gguf_file_of(dir_.path().string()); }).find("holds 2 .gguf files (a.gguf, b.gguf)"),
            std::string::npos);
  EXPECT_EQ(model_files_dir(dir_.file("a.gguf")), dir_.path().string());
}

}  // namespace
}  // namespace specula
