#pragma once
// A weight matrix W[N, K] as the kernels see it: rows are output features, K is the reduction
// (input) dimension. Storage is used in place (mmap'd checkpoint or owned buffer).
#include <cstdint>

#include "specula/io/checkpoint.h"
#include "specula/io/dtype.h"

namespace specula {

enum class WeightFormat { F32, BF16, F16, Affine };

struct WeightMatrix {
  WeightFormat format = WeightFormat::F32;
  int64_t rows = 0;            // N
  int64_t cols = 0;            // K
  const void* data = nullptr;  // dense: [N, K] elements; affine: packed uint32 [N, K*bits/32]
  // Affine only (docs/gemma4.md §4): w[n][k] = q * scale[n][k/gs] + bias[n][k/gs].
  int bits = 0;
  int group_size = 0;
  DType scale_dtype = DType::BF16;  // BF16, F16 or F32 (scales and biases share it)
  const void* scales = nullptr;     // [N, K/gs]
  const void* biases = nullptr;     // [N, K/gs]
  // Affine, optional: the scales and biases of each run of this many inputs of a row are one f32
  // factor times int8 multipliers (io/config.h QuantSpec::superblock); 0 when not promised.
  int superblock = 0;
  // Affine, optional: every code fits in this many bits, fewer than `bits` (io/config.h
  // QuantSpec::code_bits); 0 when not promised.
  int code_bits = 0;
  // Affine only, optional: the same matrix in the fast kernels' layout
  // (kernels/packed_affine.h), owned by whoever packed it. Without it, fast matmuls pack per call.
  const uint8_t* packed = nullptr;
  int packed_bits = 0;  // the code width `packed` was laid out in (packed_code_bits() when packed)

  int64_t row_bytes() const;  // bytes of one row of `data`
  int64_t groups_per_row() const { return format == WeightFormat::Affine ? cols / group_size : 0; }
  // Rows [begin, begin+count) as their own matrix (no copy; drops `packed`).
  WeightMatrix row_slice(int64_t begin, int64_t count) const;
  // Total bytes streamed when every row is read once (data + scales + biases).
  uint64_t bytes() const;
};

// Views a resolved checkpoint module ([out, in]) as a matrix. For an expert stack
// ([E, out, in]) pass `expert` to view one expert's matrix.
WeightMatrix weight_matrix(const ModuleRef& module, int64_t expert = -1);

}  // namespace specula
