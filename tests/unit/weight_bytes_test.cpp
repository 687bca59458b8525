// The share of a decode step's matrix bytes in the attention's q, k and v projections (what
// `bench` blends the int8 and int16 kernels' rates by), counted from the checkpoint's own tensors.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "specula/io/checkpoint.h"
#include "specula/model/target_weights.h"

namespace specula {
namespace {

TEST(WeightBytes, AttentionInputsAreTheStoredQkvTensors) {
  const std::string dir = std::string(SPECULA_TEST_DATA) + "/goldens/e4b-like-q4g64-mlx/model";
  const TargetCheckpoint checkpoint = load_target(dir);
  const TargetWeights weights = make_target_weights(checkpoint);
  // Codes, scales and biases of every q/k/v projection the checkpoint stores (the KV-sharing
  // layers store no k or v).
  uint64_t stored = 0;
  for (const std::string& name : checkpoint.store.names())
    for (const char* p : {".self_attn.q_proj.", ".self_attn.k_proj.", ".self_attn.v_proj."})
      if (name.find("language_model.") == 0 && name.find(p) != std::string::npos)
        stored += checkpoint.store.get(name).nbytes;
  ASSERT_GT(stored, 0u);
  EXPECT_EQ(weights.attention_input_bytes_per_token(false), stored);
  EXPECT_LT(weights.attention_input_bytes_per_token(false), weights.matrix_bytes_per_token(false));
}

}  // namespace
}  // namespace specula
