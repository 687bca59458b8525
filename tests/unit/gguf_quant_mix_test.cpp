// llama.cpp's Q4_K_M and Q5_K_M mixtures (synth/gguf_quant_mix.h) on the tensor names of real
// geometries.
#include "specula/synth/gguf_quant_mix.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace specula::synth {
namespace {

std::vector<std::string> layer_names(int layers, const std::vector<std::string>& kinds) {
  std::vector<std::string> names = {"token_embd.weight", "per_layer_token_embd.weight"};
  for (int i = 0; i < layers; ++i)
    for (const std::string& kind : kinds) names.push_back(fmt::format("blk.{}.{}.weight", i, kind));
  return names;
}

TEST(KQuantMix, EmbeddingsAndEveryThirdAttnVAndFfnDownGetQ6K) {
  const auto names = layer_names(42, {"attn_q", "attn_v", "ffn_down", "ffn_up"});
  const KQuantMix mix(names, false);
  EXPECT_EQ(mix.type_of("token_embd.weight", 2560), GgmlType::Q6_K);
  EXPECT_EQ(mix.type_of("per_layer_token_embd.weight", 10752), GgmlType::Q6_K);
  int q6 = 0;
  for (int i = 0; i < 42; ++i) {
    const GgmlType v = mix.type_of(fmt::format("blk.{}.attn_v.weight", i), 2560);
    EXPECT_EQ(v, mix.type_of(fmt::format("blk.{}.ffn_down.weight", i), 10240)) << i;
    EXPECT_EQ(mix.type_of(fmt::format("blk.{}.attn_q.weight", i), 2560), GgmlType::Q4_K);
    // 42 layers: the first 5, the last 6 (from 36), and 7, 10, ..., 34 between.
    const bool large = i < 5 || i >= 36 || (i - 5) % 3 == 2;
    EXPECT_EQ(v, large ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    q6 += v == GgmlType::Q6_K;
  }
  EXPECT_EQ(q6, 21);
}

TEST(KQuantMix, ExpertModelsCountEveryFfnDownTensorAndIndexByLayer) {
  // 30 layers with a dense and an expert ffn_down each: llama.cpp counts 60 and indexes by layer.
  const auto names = layer_names(30, {"attn_v", "ffn_down", "ffn_down_exps"});
  const KQuantMix mix(names, true);
  for (int i = 0; i < 30; ++i) {
    const bool large = i < 7 || (i - 7) % 3 == 2;
    const GgmlType want = large ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(mix.type_of(fmt::format("blk.{}.ffn_down.weight", i), 2816), want) << i;
    EXPECT_EQ(mix.type_of(fmt::format("blk.{}.ffn_down_exps.weight", i), 768), want) << i;
  }
}

TEST(KQuantMix, ShortRowsFallBackAsLlamaCppDoes) {
  const KQuantMix mix(layer_names(8, {"attn_v", "ffn_up"}), false);
  EXPECT_EQ(mix.type_of("blk.0.ffn_up.weight", 2112), GgmlType::Q5_0);
  EXPECT_EQ(mix.type_of("blk.0.attn_v.weight", 2112), GgmlType::Q8_0);
  EXPECT_EQ(mix.type_of("token_embd.weight", 64), GgmlType::Q8_0);
  EXPECT_EQ(mix.type_of("blk.0.ffn_up.weight", 100), GgmlType::F32);
}

TEST(KQuantMix, Q5KMTakesQ5KWhereQ4KMTakesQ4KAndFallsBackToQ5_1) {
  const auto names = layer_names(42, {"attn_q", "attn_v", "ffn_down"});
  const KQuantMix q4(names, false), q5(names, false, GgmlType::Q5_K);
  for (const std::string& name : names) {
    const GgmlType t4 = q4.type_of(name, 2560);
    EXPECT_EQ(q5.type_of(name, 2560), t4 == GgmlType::Q4_K ? GgmlType::Q5_K : t4) << name;
  }
  EXPECT_EQ(q5.type_of("blk.0.attn_q.weight", 2112), GgmlType::Q5_1);
  EXPECT_EQ(q5.type_of("blk.0.attn_v.weight", 2112), GgmlType::Q8_0);
}

}  // namespace
}  // namespace specula::synth
