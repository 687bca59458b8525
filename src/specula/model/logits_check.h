#pragma once
// The target's logits must be finite. A NaN or infinite logit means NaN/Inf reached the
// activations (corrupt weights, inf quantization scales, an overflow): every later token would be
// chosen from garbage (a NaN row makes greedy pick token 0 forever), so the forward pass stops
// with an error that names the position and points at `specula inspect --check`, instead of
// emitting such tokens silently. Checking costs one pass over the returned rows (O(V) each).
#include <cstdint>
#include <string>

namespace specula {

// Throws specula::Error if any of the `vocab` values of `row` (the logits of the token at context
// position `position`) is NaN or infinite; `model_dir` is named in the hint.
void require_finite_logits(const float* row, int64_t vocab, int64_t position, const std::string& model_dir);

}  // namespace specula
