#pragma once
// Matrices that multiply the same input (q/k/v of a layer, gate/up of its MLP), run as one matmul
// in fast precision: one pass of the thread pool instead of one per matrix. A decode step issues a
// few hundred small matmuls; each pass costs a hand-off to the other threads and a wait for the
// slowest, which for the 512-row k and v projections is a large part of their time.
//
// Packed blocks hold 16 output rows side by side and every output row's sum is computed alone, so
// the fused product's rows are bitwise the separate products' rows.
#include <initializer_list>
#include <optional>

#include "specula/kernels/weight_matrix.h"

namespace specula {

// The parts as one packed matrix ([sum of rows, cols]) when they lie back to back in one packed
// layout: all packed, each a whole number of 16-row blocks, the same cols, bits, group size and
// scale dtype, and each part's packed bytes right after the previous part's. nullopt otherwise
// (the caller multiplies them one by one). Only the fast kernels may read the result (its `data`
// is the first part's, for the argument checks only): check fast_matmul_supported() before use.
std::optional<WeightMatrix> fuse_packed(std::initializer_list<const WeightMatrix*> parts);

}  // namespace specula
