#include "specula/kernels/packed_affine.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "specula/io/dtype.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/quant.h"
#include "specula/kernels/shared_scales.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula {

#if defined(SPECULA_X86)
namespace detail {
// packed_affine_avx512.cpp and packed_affine_avx2.cpp: whole blocks of 16 rows, the same bytes
// as the code below.
void pack_affine_full_blocks_avx512(const WeightMatrix& w, int64_t block_begin, int64_t block_end, uint8_t* out);
void pack_affine_full_blocks_avx2(const WeightMatrix& w, int64_t block_begin, int64_t block_end, uint8_t* out);
}  // namespace detail
#endif

namespace {

int64_t block_count(const WeightMatrix& w) { return (w.rows + kPackedRows - 1) / kPackedRows; }

// Whether the fast kernels that run are the AVX-512 VNNI ones (the layouts they alone read pay
// only there).
bool avx512_vnni_kernels_active() {
#if defined(SPECULA_X86)
  return active_isa() == Isa::Avx512 && cpu_features().avx512vnni;
#else
  return false;
#endif
}

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline void store16(uint8_t* p, uint64_t v) {
  const auto h = static_cast<uint16_t>(v);
  std::memcpy(p, &h, 2);
}

// One row's codes of one group into the group's chunks (lane `j`). `src` holds the group's codes
// as stored (gs * bits / 8 bytes, a multiple of 8), 4 or 8 bits wide as in the packed layout.
void pack_row_codes(const uint8_t* src, int64_t src_bytes, int bits, int j, uint8_t* chunks) {
  uint8_t* dst = chunks + 2 * j;
  for (int64_t i = 0; i < src_bytes; i += 8) {
    uint64_t v = load64(src + i);
    if (bits == 4) {
      // Each 16-bit word holds codes k..k+3 as nibbles 0..3; swap the middle two so the low
      // nibbles of its bytes are k, k+1 and the high nibbles k+2, k+3.
      v = (v & 0xF00FF00FF00FF00Full) | ((v >> 4) & 0x00F000F000F000F0ull) | ((v << 4) & 0x0F000F000F000F00ull);
    }
    // The four words go to four consecutive chunks.
    for (int q = 0; q < 4; ++q) store16(dst + (i / 2 + q) * 32, v >> (16 * q));
  }
}

// The gs codes of one group as stored (`bits` wide, LSB first; a group starts on a byte), read
// byte by byte so that nothing past the group is touched.
void read_group_codes(const uint8_t* src, int bits, int gs, uint8_t* codes) {
  uint64_t pending = 0;
  int pending_bits = 0;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  for (int i = 0; i < gs; ++i) {
    while (pending_bits < bits) {
      pending |= static_cast<uint64_t>(*src++) << pending_bits;
      pending_bits += 8;
    }
    codes[i] = static_cast<uint8_t>(pending & mask);
    pending >>= bits;
    pending_bits -= bits;
  }
}

// As pack_row_codes, code by code, for any stored width: the group's codes (`src`, as stored) in
// the `packed_bits` layout (4, 6 or 8). False, with nothing written, when a code does not fit it
// (codes stored wider than their promised width).
bool layout_row_codes(const uint8_t* src, int bits, int gs, int packed_bits, int j, uint8_t* chunks) {
  uint8_t* dst = chunks + 2 * j;
  uint8_t codes[128];  // the largest group
  read_group_codes(src, bits, gs, codes);
  if (packed_bits < bits && std::any_of(codes, codes + gs, [&](uint8_t q) { return q >> packed_bits != 0; }))
    return false;
  if (packed_bits == 6) {
    for (int k = 0; k < gs; k += 8) {
      const uint8_t* q = codes + k;
      uint8_t* three = dst + k / 8 * 96;  // the two low-nibble chunks, then the top bits
      for (int i = 0; i < 2; ++i) {
        three[32 * i] = static_cast<uint8_t>((q[4 * i] & 15) | (q[4 * i + 2] & 15) << 4);
        three[32 * i + 1] = static_cast<uint8_t>((q[4 * i + 1] & 15) | (q[4 * i + 3] & 15) << 4);
      }
      three[64] = static_cast<uint8_t>(q[0] >> 4 | (q[2] >> 4) << 2 | (q[4] >> 4) << 4 | (q[6] >> 4) << 6);
      three[65] = static_cast<uint8_t>(q[1] >> 4 | (q[3] >> 4) << 2 | (q[5] >> 4) << 4 | (q[7] >> 4) << 6);
    }
    return true;
  }
  for (int k = 0; k < gs; k += 4) {
    const uint8_t* q = codes + k;
    if (packed_bits == 4) {
      dst[k / 4 * 32] = static_cast<uint8_t>(q[0] | q[2] << 4);
      dst[k / 4 * 32 + 1] = static_cast<uint8_t>(q[1] | q[3] << 4);
    } else {
      for (int i = 0; i < 4; i += 2) {
        dst[(k + i) / 2 * 32] = static_cast<uint8_t>(q[i]);
        dst[(k + i) / 2 * 32 + 1] = static_cast<uint8_t>(q[i + 1]);
      }
    }
  }
  return true;
}

}  // namespace

int packed_code_bits(const WeightMatrix& w) {
  const int width = w.code_bits > 0 ? w.code_bits : w.bits;
  if (width <= 4) return 4;
  return width <= 6 && six_bit_codes_pay() ? 6 : 8;
}

bool six_bit_codes_pay() { return avx512_vnni_kernels_active(); }

bool packable(const WeightMatrix& w) {
  if (w.format != WeightFormat::Affine || !is_supported_bits(w.bits) || w.rows <= 0 || w.cols <= 0) return false;
  const bool group = w.group_size == 32 || w.group_size == 64 || w.group_size == 128 ||
                     (w.group_size == 16 && packed_code_bits(w) >= 6);  // GGUF Q6_K
  const bool superblock = w.superblock == 0 || (shared_factor_format(w.bits, w.group_size) && w.superblock > 0 &&
                                                w.superblock % w.group_size == 0 && w.cols % w.superblock == 0);
  return group && w.cols % w.group_size == 0 && (w.cols * w.bits) % 32 == 0 && superblock;
}

bool shared_factors_pay() { return avx512_vnni_kernels_active(); }

void use_shared_factors_where_they_pay(WeightMatrix& w) {
  if (!shared_factors_pay()) w.superblock = 0;
}

int64_t packed_superblock_groups(const WeightMatrix& w) { return w.superblock > 0 ? w.superblock / w.group_size : 0; }

int64_t packed_code_bytes(const WeightMatrix& w) { return kPackedRows * w.group_size * packed_code_bits(w) / 8; }

int64_t packed_group_bytes(const WeightMatrix& w) {
  const int64_t params = packed_superblock_groups(w) > 0
                             ? 2 * kPackedRows
                             : 2 * kPackedRows * static_cast<int64_t>(dtype_size(w.scale_dtype));
  return packed_code_bytes(w) + params;
}

int64_t packed_block_bytes(const WeightMatrix& w) {
  const int64_t groups = w.groups_per_row(), per_superblock = packed_superblock_groups(w);
  const int64_t headers = per_superblock > 0 ? groups / per_superblock * kPackedHeaderBytes : 0;
  return groups * packed_group_bytes(w) + headers;
}

int64_t packed_bytes(const WeightMatrix& w) { return block_count(w) * packed_block_bytes(w); }

int64_t packed_group_offset(const WeightMatrix& w, int64_t g) {
  const int64_t per_superblock = packed_superblock_groups(w);
  const int64_t headers = per_superblock > 0 ? (g / per_superblock + 1) * kPackedHeaderBytes : 0;
  return g * packed_group_bytes(w) + headers;
}

// Copies one scale or bias (2 or 4 bytes) without a call per value.
inline void copy_param(uint8_t* dst, const uint8_t* src, int64_t size) {
  if (size == 2) {
    uint16_t v;
    std::memcpy(&v, src, 2);
    std::memcpy(dst, &v, 2);
  } else {
    uint32_t v;
    std::memcpy(&v, src, 4);
    std::memcpy(dst, &v, 4);
  }
}

// Values [first, first + count) of a scale or bias array of dtype t, as f32.
void read_params(const void* params, DType t, int64_t first, int64_t count, float* out) {
  const auto* p = static_cast<const uint8_t*>(params) + first * static_cast<int64_t>(dtype_size(t));
  for (int64_t i = 0; i < count; ++i) {
    if (t == DType::F32) {
      std::memcpy(&out[i], p + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = t == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
}

// Row j's parameters of every superblock of block b as shared factors and int8 multipliers.
// `values` and `multipliers` are scratch of groups_per_row() entries.
void pack_shared_factors(const WeightMatrix& w, int64_t b, int j, uint8_t* block, float* values, int8_t* multipliers) {
  const int64_t groups = w.groups_per_row(), per_superblock = packed_superblock_groups(w);
  const int64_t n = b * kPackedRows + j, code_bytes = packed_code_bytes(w), group_bytes = packed_group_bytes(w);
  for (int part = 0; part < 2; ++part) {
    read_params(part == 0 ? w.scales : w.biases, w.scale_dtype, n * groups, groups, values);
    uint8_t* superblock = block;
    for (int64_t g0 = 0; g0 < groups; g0 += per_superblock) {
      float factor = 0.0f;
      if (!factor_shared_scale(values + g0, static_cast<int>(per_superblock), factor, multipliers))
        fail(
            "pack_affine: row {} of a [{}, {}] matrix: the {} of inputs [{}, {}) are not one f32 factor times int8 "
            "multipliers, as its superblock {} promised",
            n, w.rows, w.cols, part == 0 ? "scales" : "biases", g0 * w.group_size, (g0 + per_superblock) * w.group_size,
            w.superblock);
      std::memcpy(superblock + (part * kPackedRows + j) * 4, &factor, 4);
      uint8_t* params = superblock + kPackedHeaderBytes + code_bytes + part * kPackedRows + j;
      for (int64_t i = 0; i < per_superblock; ++i) params[i * group_bytes] = static_cast<uint8_t>(multipliers[i]);
      superblock += kPackedHeaderBytes + per_superblock * group_bytes;
    }
  }
}

void pack_affine_blocks(const WeightMatrix& w, int64_t block_begin, int64_t block_end, uint8_t* out) {
  if (!packable(w))
    fail("pack_affine: the matrix [{}, {}] ({}-bit groups of {}) has no packed layout", w.rows, w.cols, w.bits,
         w.group_size);
  const int64_t groups = w.groups_per_row();
  const int64_t block_bytes = packed_block_bytes(w);
  const bool shared = packed_superblock_groups(w) > 0;
  const int64_t code_bytes = packed_code_bytes(w);
  const int64_t src_group_bytes = w.group_size * w.bits / 8;
  const auto sd = static_cast<int64_t>(dtype_size(w.scale_dtype));
  const auto* data = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  const auto* biases = static_cast<const uint8_t*>(w.biases);
  const int64_t row_bytes = w.row_bytes();
  const int64_t first_block = block_begin;
  const int packed_bits = packed_code_bits(w);
  // 4- and 8-bit codes move as they are stored (word by word, and by the SIMD packers); others
  // code by code.
  const bool by_code = packed_bits != w.bits || packed_bits == 6;
#if defined(SPECULA_X86)
  if (const Isa isa = active_isa(); isa != Isa::Scalar && !by_code) {
    const int64_t full_end = std::min(block_end, w.rows / kPackedRows);
    if (full_end > block_begin) {
      (isa == Isa::Avx512 ? detail::pack_affine_full_blocks_avx512 : detail::pack_affine_full_blocks_avx2)(
          w, block_begin, full_end, out);
      block_begin = full_end;
    }
  }
#endif
  for (int64_t b = block_begin; b < block_end; ++b) {
    const int64_t n0 = b * kPackedRows;
    const int64_t rows = std::min<int64_t>(kPackedRows, w.rows - n0);
    uint8_t* block = out + b * block_bytes;
    if (rows < kPackedRows) std::memset(block, 0, static_cast<size_t>(block_bytes));  // rows past N
    // Row by row: each source row is read once, front to back.
    for (int j = 0; j < rows; ++j) {
      const int64_t n = n0 + j;
      const uint8_t* src = data + n * row_bytes;
      const uint8_t* s = scales + n * groups * sd;
      const uint8_t* bi = biases + n * groups * sd;
      for (int64_t g = 0; g < groups; ++g) {
        uint8_t* dst = block + packed_group_offset(w, g);
        if (by_code) {
          if (!layout_row_codes(src + g * src_group_bytes, w.bits, w.group_size, packed_bits, j, dst))
            fail(
                "pack_affine: row {} of a [{}, {}] matrix: a code of inputs [{}, {}) does not fit in {} bits, as its "
                "code_bits {} promised",
                n, w.rows, w.cols, g * w.group_size, (g + 1) * w.group_size, packed_bits, w.code_bits);
        } else {
          pack_row_codes(src + g * src_group_bytes, src_group_bytes, w.bits, j, dst);
        }
        if (shared) continue;
        copy_param(dst + code_bytes + j * sd, s + g * sd, sd);
        copy_param(dst + code_bytes + (kPackedRows + j) * sd, bi + g * sd, sd);
      }
    }
  }
  if (!shared) return;
  std::vector<float> values(static_cast<size_t>(groups));
  std::vector<int8_t> multipliers(values.size());
  for (int64_t b = first_block; b < block_end; ++b) {
    const int64_t rows = std::min<int64_t>(kPackedRows, w.rows - b * kPackedRows);
    for (int j = 0; j < rows; ++j)
      pack_shared_factors(w, b, j, out + b * block_bytes, values.data(), multipliers.data());
  }
}

PackedBuffer pack_matrices(std::span<WeightMatrix* const> matrices, ThreadPool& pool,
                           const std::function<void(const WeightMatrix&)>& after_each) {
  constexpr int64_t kAlign = 64;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (WeightMatrix* w : matrices) {
    offsets.push_back(total);
    if (packable(*w)) total += (packed_bytes(*w) + kAlign - 1) / kAlign * kAlign;
  }
  PackedBuffer buffer(
      static_cast<size_t>(total),
      "the fast-precision weight layout (use --precision exact to run from the checkpoint's own layout)");
  for (size_t i = 0; i < matrices.size(); ++i) {
    WeightMatrix& w = *matrices[i];
    if (!packable(w)) continue;
    uint8_t* out = buffer.data() + offsets[i];
    pool.parallel_for(block_count(w), 1, [&](int, int64_t b0, int64_t b1) { pack_affine_blocks(w, b0, b1, out); });
    w.packed = out;
    w.packed_bits = packed_code_bits(w);
    if (after_each) after_each(w);
  }
  return buffer;
}

}  // namespace specula
