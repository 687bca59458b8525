#pragma once
// The tensor types of llama.cpp's Q4_K_M and Q5_K_M files, for `specula synth --format gguf --quant
// q4_k_m|q5_k_m`: the type each tensor of a GGUF target gets by the rules llama.cpp's quantizer
// applies for those file types (its llama-quant.cpp, read for the facts). With the file type's
// base type Q4_K or Q5_K:
//   - token_embd and per_layer_token_embd: Q6_K (the embedding is tied to the output, and the
//     quantizer treats both tables as the output);
//   - attn_v and every ffn_down tensor: Q6_K on the layers where `more_bits` holds (the first and
//     the last eighth of them, and every third one between), else the base type;
//   - every other matrix: the base type.
// A row length that is not a multiple of 256 falls back as there: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K
// to Q8_0, and to F32 (llama.cpp: F16) when it is not a multiple of 32 either.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "specula/kernels/ggml_quants.h"

namespace specula::synth {

class KQuantMix {
 public:
  // `names`: every matrix of the file (GGUF names); `experts`: the model has MoE expert tensors;
  // `base`: Q4_K (Q4_K_M) or Q5_K (Q5_K_M).
  KQuantMix(const std::vector<std::string>& names, bool experts, GgmlType base = GgmlType::Q4_K);

  GgmlType type_of(const std::string& name, int64_t cols) const;

 private:
  std::map<std::string, bool> more_bits_;  // attn_v / ffn_down tensors: whether they get Q6_K
  GgmlType base_;
};

}  // namespace specula::synth
