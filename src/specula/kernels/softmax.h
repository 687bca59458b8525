#pragma once
// Softmax, argmax and top-k over one row (sequential, fixed order: batch invariant by design).
#include <cstdint>

namespace specula {

// x[i] = exp(x[i] - max) / sum, sum accumulated in index order. n >= 1.
void softmax_inplace(float* x, int64_t n);

// Index of the largest value; ties go to the lowest index, as in MLX's argmax
// (docs/gemma4.md §5.4). NaN entries are never selected unless every entry is NaN (then 0).
int64_t argmax(const float* x, int64_t n);

// The k largest entries in descending value order, ties broken by the lower index; writes k
// indices. 1 <= k <= n.
void top_k(const float* x, int64_t n, int64_t k, int64_t* indices);

}  // namespace specula
