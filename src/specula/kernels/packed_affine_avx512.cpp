// AVX-512 packing of affine 4/8-bit weights into the fast kernels' layout (kernels/packed_affine.h):
// the same bytes as the portable packer, ~10x faster, so a 4-bit E4B packs in a fraction of a
// second. One 32-bit gather per pair of chunks takes a word pair from each of the 16 rows; the
// nibble shuffle then runs on all 16 at once. Only whole blocks of 16 rows (the caller handles a
// partial last block), and gathers stay inside each row's group, so nothing past the tensor is read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "specula/kernels/packed_affine.h"

namespace specula::detail {

void pack_affine_full_blocks_avx512(const WeightMatrix& w, int64_t block_begin, int64_t block_end, uint8_t* out) {
  const int64_t groups = w.groups_per_row();
  const int64_t block_bytes = packed_block_bytes(w);
  const bool shared = packed_superblock_groups(w) > 0;  // the caller writes the parameters
  const int64_t chunks = w.group_size / (w.bits == 4 ? 4 : 2);
  const int64_t src_group_bytes = w.group_size * w.bits / 8;
  const int64_t sd = w.scale_dtype == DType::F32 ? 4 : 2;
  const int64_t row_bytes = w.row_bytes();
  const auto* data = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  const auto* biases = static_cast<const uint8_t*>(w.biases);
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i keep = _mm512_set1_epi32(static_cast<int>(0xF00FF00Fu));
  const __m512i down = _mm512_set1_epi32(0x00F000F0);
  const __m512i up = _mm512_set1_epi32(0x0F000F00);
  const int64_t block_src_bytes = kPackedRows * row_bytes;  // 16 whole rows: contiguous
  for (int64_t b = block_begin; b < block_end; ++b) {
    const uint8_t* block_src = data + b * block_src_bytes;
    // The gathers walk 16 rows at once, more streams than the hardware prefetcher follows: fetch
    // the next block while this one is packed.
    if (b + 1 < block_end) {
      for (int64_t i = 0; i < block_src_bytes; i += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block_src + block_src_bytes + i), _MM_HINT_T1);
    }
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* dst = out + b * block_bytes + packed_group_offset(w, g);
      const uint8_t* src = block_src + g * src_group_bytes;
      for (int64_t c = 0; c < chunks; c += 2) {
        // Lane j: row j's 16-bit words for chunks c (low half) and c + 1 (high half).
        __m512i v = _mm512_i32gather_epi32(rows, src + 2 * c, 1);
        if (w.bits == 4) {
          v = _mm512_or_si512(_mm512_and_si512(v, keep),
                              _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(v, 4), down),
                                              _mm512_and_si512(_mm512_slli_epi32(v, 4), up)));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c * 32), _mm512_cvtepi32_epi16(v));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (c + 1) * 32),
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
      }
      if (shared) continue;
      uint8_t* params = dst + chunks * 32;
      const int64_t at = (b * kPackedRows * groups + g) * sd;
      for (int j = 0; j < kPackedRows; ++j) {
        const int64_t from = at + j * groups * sd;
        for (int64_t i = 0; i < sd; ++i) {
          params[j * sd + i] = scales[from + i];
          params[(kPackedRows + j) * sd + i] = biases[from + i];
        }
      }
    }
  }
}

}  // namespace specula::detail
