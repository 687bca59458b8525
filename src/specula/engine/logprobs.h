#pragma once
// Log-probabilities of a generated token and the most likely alternatives, from the model's logits
// row (log-softmax accumulated in double; NaN logits count as -inf).
#include <cstdint>
#include <span>

#include "specula/engine/engine.h"

namespace specula {

// `top` most likely tokens by (logprob desc, id asc); texts from `tokenizer` (special tokens as
// written) when it is non-null, else empty.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int top, const text::Tokenizer* tokenizer);

}  // namespace specula
