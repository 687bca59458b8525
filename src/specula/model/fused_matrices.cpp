#include "specula/model/fused_matrices.h"

#include "specula/kernels/packed_affine.h"

namespace specula {

std::optional<WeightMatrix> fuse_packed(std::initializer_list<const WeightMatrix*> parts) {
  if (parts.size() == 0) return std::nullopt;
  const WeightMatrix& first = **parts.begin();
  WeightMatrix fused = first;
  fused.rows = 0;
  const uint8_t* next = first.packed;
  for (const WeightMatrix* w : parts) {
    if (w->packed == nullptr || w->packed != next || w->rows % kPackedRows != 0) return std::nullopt;
    if (w->format != first.format || w->cols != first.cols || w->bits != first.bits ||
        w->group_size != first.group_size || w->scale_dtype != first.scale_dtype || w->superblock != first.superblock ||
        w->code_bits != first.code_bits)
      return std::nullopt;
    fused.rows += w->rows;
    next = w->packed + packed_bytes(*w);
  }
  return fused;
}

}  // namespace specula
