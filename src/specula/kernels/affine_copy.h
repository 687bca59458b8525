#pragma once
// An MLX affine copy of a dense (f32, bf16 or f16) matrix, made at load so that a matrix stored in
// 16 bits is read in 4 or 8. Per group of `group_size` inputs of a row: bias = the group's minimum
// and scale = its range / (2^bits - 1), both rounded to bf16, then each code is the nearest level of
// the rounded pair (clamped). The copy is an approximation of the stored matrix, for weights whose
// precision changes speed but not output (the drafter: the target verifies every draft).
#include <cstdint>
#include <vector>

#include "specula/kernels/weight_matrix.h"
#include "specula/util/thread_pool.h"

namespace specula {

// Whether AffineCopy takes w: a dense matrix whose width is a multiple of group_size.
bool affine_copyable(const WeightMatrix& w, int group_size);

class AffineCopy {
 public:
  // bits: 4 or 8; group_size: 32, 64 or 128. Throws specula::Error when !affine_copyable(w, group_size).
  AffineCopy(const WeightMatrix& dense, int bits, int group_size, ThreadPool& pool);
  AffineCopy(AffineCopy&&) = default;
  AffineCopy& operator=(AffineCopy&&) = default;

  // The copy as the kernels see it (valid while this object lives; bf16 scales and biases).
  const WeightMatrix& matrix() const { return matrix_; }

 private:
  std::vector<uint32_t> words_;
  std::vector<uint16_t> scales_, biases_;
  WeightMatrix matrix_;
};

}  // namespace specula
