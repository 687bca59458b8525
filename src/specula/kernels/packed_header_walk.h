#pragma once
// Internal to the fast matmul kernels (matmul_fast_avx2.cpp, matmul_fast_avx512.cpp). Internal
// linkage on purpose: each ISA-specific file compiles its own copy with its own instruction set,
// so no copy built for AVX-512 can be the one an AVX2 caller links to.
#include <cstdint>

#include "specula/kernels/matmul_kernels.h"
#include "specula/kernels/packed_affine.h"

namespace specula::detail {
namespace {

// The shared-factor header of the superblock a block's walk is in (kernels/packed_affine.h).
struct HeaderWalk {
  const uint8_t* header = nullptr;
  int64_t groups_left = 0;
};

// At the start of a group: steps over a superblock's header, remembering where it is.
inline const uint8_t* enter_group(const uint8_t* p, const PackedParams& pp, HeaderWalk& walk) {
  if (walk.groups_left == 0) {
    walk.header = p;
    walk.groups_left = pp.superblock_groups;
    p += kPackedHeaderBytes;
  }
  --walk.groups_left;
  return p;
}

// Bytes of the scales (or of the biases) of one group.
template <bool SHARED>
inline int64_t param_bytes(const PackedParams& pp) {
  if constexpr (SHARED) return kPackedRows;
  return kPackedRows * static_cast<int64_t>(dtype_size(pp.dtype));
}

}  // namespace
}  // namespace specula::detail
