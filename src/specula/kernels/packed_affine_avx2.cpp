// AVX2 packing of affine 4/8-bit weights into the fast kernels' layout (kernels/packed_affine.h):
// the same bytes as the portable packer and the AVX-512 one, for the AVX2 fast kernel's CPUs. Two
// 32-bit gathers per pair of chunks take a word pair from each of the 16 rows (8 rows each); the
// nibble shuffle runs on 8 rows at once. Only whole blocks of 16 rows (the caller handles a
// partial last block), and gathers stay inside each row's group, so nothing past the tensor is read.
#include <immintrin.h>

#include "specula/kernels/packed_affine.h"

namespace specula::detail {

namespace {

// Row j's nibbles k..k+3 of each 16-bit word reordered so the low nibbles of its bytes are k, k+1
// and the high nibbles k+2, k+3 (the portable packer's swap of the middle two).
inline __m256i swap_middle_nibbles(__m256i v) {
  const __m256i keep = _mm256_set1_epi32(static_cast<int>(0xF00FF00Fu));
  const __m256i down = _mm256_set1_epi32(0x00F000F0);
  const __m256i up = _mm256_set1_epi32(0x0F000F00);
  return _mm256_or_si256(_mm256_and_si256(v, keep), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(v, 4), down),
                                                                    _mm256_and_si256(_mm256_slli_epi32(v, 4), up)));
}

// The 16 low (or high) words of rows 0-7 (a) and 8-15 (b), in row order.
inline __m256i words_in_row_order(__m256i a, __m256i b) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
}

}  // namespace

void pack_affine_full_blocks_avx2(const WeightMatrix& w, int64_t block_begin, int64_t block_end, uint8_t* out) {
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
  const __m256i rows =
      _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(row_bytes)));
  const __m256i low_words = _mm256_set1_epi32(0xFFFF);
  const int64_t block_src_bytes = kPackedRows * row_bytes;  // 16 whole rows: contiguous
  for (int64_t b = block_begin; b < block_end; ++b) {
    const uint8_t* block_src = data + b * block_src_bytes;
    // The gathers walk 16 rows at once, more streams than the hardware prefetcher follows: fetch
    // the next block while this one is packed.
    if (b + 1 < block_end) {
      const char* next = reinterpret_cast<const char*>(block_src + block_src_bytes);
      for (int64_t i = 0; i < block_src_bytes; i += 64) _mm_prefetch(next + i, _MM_HINT_T1);
    }
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* dst = out + b * block_bytes + packed_group_offset(w, g);
      const uint8_t* src = block_src + g * src_group_bytes;
      for (int64_t c = 0; c < chunks; c += 2) {
        // Lane j: row j's (8 + j's) 16-bit words for chunks c (low half) and c + 1 (high half).
        __m256i va = _mm256_i32gather_epi32(reinterpret_cast<const int*>(src + 2 * c), rows, 1);
        __m256i vb = _mm256_i32gather_epi32(reinterpret_cast<const int*>(src + 8 * row_bytes + 2 * c), rows, 1);
        if (w.bits == 4) {
          va = swap_middle_nibbles(va);
          vb = swap_middle_nibbles(vb);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c * 32),
                            words_in_row_order(_mm256_and_si256(va, low_words), _mm256_and_si256(vb, low_words)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (c + 1) * 32),
                            words_in_row_order(_mm256_srli_epi32(va, 16), _mm256_srli_epi32(vb, 16)));
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
