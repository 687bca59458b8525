#pragma once
// Affine 4-bit and 8-bit weights re-laid out for the fast kernels (Precision::Fast).
//
// The checkpoint stores each output row's codes contiguously, so a kernel that walks a row gets
// one quantization group's partial sum spread over the lanes of a vector and must reduce it before
// the group's scale applies. The packed layout puts 16 output rows side by side instead: lane j
// of every vector belongs to output row j, so the per-group float work (scale, bias) is one vector
// operation per 16 outputs and the results need no horizontal reduction.
//
// Layout (all little-endian), per block of 16 output rows (rows past N are zero), per group g,
// in the packed code width (packed_code_bits(): codes of 2-3 bits as 4-bit, of 5-6 bits as 6- or
// 8-bit):
//   codes   gs/4 chunks (4-bit) or gs/2 chunks (8-bit) of 32 bytes; a chunk covers 4 (2) inputs
//           k..k+3 (k..k+1) of the group for the 16 rows:
//             4-bit: bytes 2j, 2j+1 = q[j][k] | q[j][k+2] << 4,  q[j][k+1] | q[j][k+3] << 4
//             8-bit: bytes 2j, 2j+1 = q[j][k], q[j][k+1]
//           so widening the 32 bytes to 16-bit words gives, lane by lane, the int16 pairs that
//           `vpdpwssd` multiplies with a broadcast pair of activations (low nibbles: inputs k, k+1;
//           the words shifted right by 4: inputs k+2, k+3).
//           6-bit: per 8 inputs k..k+7, three chunks: the 4-bit chunks of the codes' low nibbles
//           for k..k+3 and for k+4..k+7, then one of their top two bits:
//             byte 2j   = t[k] | t[k+2] << 2 | t[k+4] << 4 | t[k+6] << 6   (t = q >> 4)
//             byte 2j+1 = t[k+1] | t[k+3] << 2 | t[k+5] << 4 | t[k+7] << 6
//           so each word of the low chunks finds its codes' top bits in the same word of the third.
//   scales  16 values of the 16 rows (the checkpoint's scale dtype, unchanged)
//   biases  16 values, likewise
// Groups follow each other; blocks follow each other. Values are copied, never rounded, so the
// packed matrix is the same matrix.
//
// Shared factors (w.superblock > 0, GGUF K-quants): a superblock's groups are preceded by a header
// of 16 f32 scale factors and 16 f32 bias factors (one per row), and each group's parameters are 16
// int8 scale multipliers then 16 int8 bias multipliers; scale = factor * multiplier, the
// checkpoint's value bit for bit (kernels/shared_scales.h). A Q4_K group of 16 rows then takes 288
// bytes plus 16 of header instead of 384, a Q6_K one 288 plus 8 instead of 384 (as 6-bit codes: 224 plus 8).
#include <cstddef>
#include <cstdint>

#include <functional>
#include <span>

#include "specula/kernels/weight_matrix.h"
#include "specula/util/huge_page_buffer.h"
#include "specula/util/thread_pool.h"

namespace specula {

inline constexpr int64_t kPackedRows = 16;  // output rows per packed block
// A superblock's header: 16 f32 scale factors, then 16 f32 bias factors.
inline constexpr int64_t kPackedHeaderBytes = 2 * kPackedRows * 4;

// Whether pack_affine() takes w: affine with any supported width and group size 32/64/128, or
// 16 with codes of 5 to 8 bits (GGUF Q6_K).
bool packable(const WeightMatrix& w);
// The code width of w's packed layout, the one its fast kernel reads: 4 for codes of 2 to 4 bits,
// 6 for codes of 5 and 6 bits where six_bit_codes_pay(), 8 otherwise. Narrower codes are widened
// as they are packed (their values unchanged), so every affine width runs the fast kernels.
int packed_code_bits(const WeightMatrix& w);
// Whether the fast kernels of the active kernel set read 6-bit codes: the AVX-512 VNNI ones do (a
// quarter fewer bytes than 8-bit codes for GGUF Q5_K and Q6_K matrices and MLX 5/6-bit ones).
bool six_bit_codes_pay();

// Groups per shared-factor superblock; 0 when every group carries its own scales and biases.
int64_t packed_superblock_groups(const WeightMatrix& w);
// Whether the fast kernels of the active kernel set read shared factors at no cost: the AVX-512
// VNNI ones do; the AVX2 ones ran K-quant matrices 25-40 % slower at 4-8 rows with them (GCC
// spills their registers; docs/performance.md), so loaders there pack such matrices with
// per-group parameters.
bool shared_factors_pay();
// Clears w's superblock where shared_factors_pay() says no, before it is packed.
void use_shared_factors_where_they_pay(WeightMatrix& w);

// Bytes of one group's codes in one block; of one group of one block (codes and parameters), of
// one block (headers included), of the whole packed matrix; where group g starts in its block.
int64_t packed_code_bytes(const WeightMatrix& w);
int64_t packed_group_bytes(const WeightMatrix& w);
int64_t packed_block_bytes(const WeightMatrix& w);
int64_t packed_bytes(const WeightMatrix& w);
int64_t packed_group_offset(const WeightMatrix& w, int64_t g);

// Writes w's packed layout to out (packed_bytes(w) bytes). Rows [block_begin, block_end) of
// blocks only, so callers can split the work over threads. Throws when a matrix promised shared
// factors and a superblock of a row has none.
void pack_affine_blocks(const WeightMatrix& w, int64_t block_begin, int64_t block_end, uint8_t* out);

// The packed matrices' memory (huge pages where the kernel allows: fewer TLB misses on the
// stream and fewer page faults while packing).
using PackedBuffer = HugePageBuffer;

// Packs every packable matrix of `matrices` into one buffer (over the pool's threads) and points
// its `packed` at it; others are left alone. `after_each` runs once per packed matrix, e.g. to
// let go of the checkpoint pages it was read from.
PackedBuffer pack_matrices(std::span<WeightMatrix* const> matrices, ThreadPool& pool,
                           const std::function<void(const WeightMatrix&)>& after_each = {});

}  // namespace specula
