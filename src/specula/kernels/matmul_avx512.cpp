// AVX-512 (F/BW/VL/DQ) matmul kernels. Built with AVX-512 flags; called only when the CPU has them.
//
// Batch invariance: every output element y[r][n] is produced by the same instruction sequence
// whatever the number of X rows in the call, the row's position and the thread count: the row
// kernels are templated on the number R of X rows they handle together, and each row keeps its own
// accumulators, updated by the same ops in the same order for every R. Threads split N only.
//
// Affine weights use y = sum_g s_g * (sum_{j in g} x_j q_j) + sum_g b_g * (sum_{j in g} x_j): the
// per-group sums of x are computed once per call, and for 4-bit weights x is pre-permuted once per
// call to the order the codes come out of the packed bytes (low nibbles, then high nibbles), so
// unpacking is a byte->dword widening, a shift and a 16-entry vpermps table, shared by all R rows.
//
// No standard-library templates here (see MatmulJob).
// GCC 12's AVX-512 headers build _mm512_undefined_*() as a self-initialized variable, which trips
// -W(maybe-)uninitialized wherever an intrinsic using it is inlined; the value is never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "specula/kernels/matmul_kernels.h"
#include "specula/kernels/unroll.h"

namespace specula::detail {

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// ---- unpacking -------------------------------------------------------------------------------

// Generic unpack of 16 consecutive b-bit codes (2*b bytes, b <= 8): broadcast the bytes to every
// 128-bit lane, move the (one or two) bytes holding code l into dword l, shift and mask.
struct UnpackTables {
  alignas(64) int8_t shuffle[64];
  alignas(64) int32_t shift[16];
};

constexpr UnpackTables make_unpack_tables(int bits) {
  UnpackTables t{};
  for (int l = 0; l < 16; ++l) {
    const int bit = l * bits;
    const int byte = bit / 8;
    const int shift = bit % 8;
    t.shuffle[4 * l + 0] = static_cast<int8_t>(byte);
    t.shuffle[4 * l + 1] = static_cast<int8_t>(shift + bits > 8 ? byte + 1 : -128);
    t.shuffle[4 * l + 2] = -128;
    t.shuffle[4 * l + 3] = -128;
    t.shift[l] = shift;
  }
  return t;
}

template <int BITS>
struct Unpack {
  static constexpr UnpackTables tables = make_unpack_tables(BITS);
};

template <int BITS>
inline __m512 unpack16(const uint8_t* p) {
  // Masked load: reads exactly the 2*BITS bytes of the 16 codes (never past the row's end).
  const __m128i bytes = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << (2 * BITS)) - 1u), p);
  const __m512i all = _mm512_broadcast_i32x4(bytes);
  const __m512i sel = _mm512_shuffle_epi8(all, _mm512_load_si512(Unpack<BITS>::tables.shuffle));
  const __m512i v = _mm512_srlv_epi32(sel, _mm512_load_si512(Unpack<BITS>::tables.shift));
  return _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32((1 << BITS) - 1)));
}

// sum_{j in group} q_j * x_r[j] for R rows, as two partial sums (even and odd 16-code chunks:
// two independent FMA chains per row). `x` is the group's start in row 0 (in the permuted layout
// for 4-bit weights). GS is a template parameter so the chunk loop unrolls completely.
template <int BITS, int GS, int R>
inline void group_dot(const uint8_t* wg, const float* x, int64_t ldx, __m512* even, __m512* odd) {
  for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm512_setzero_ps();
  if constexpr (BITS == 4) {
    // vpermps reads only the low 4 bits of each index lane: a 16-entry table turns a nibble into
    // its float value in one op (no mask, no int->float conversion).
    const __m512 values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    SPECULA_UNROLL(4)
    for (int c = 0; c < GS; c += 32) {
      const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wg + c / 2)));
      const __m512 lo = _mm512_permutexvar_ps(b, values);
      const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), values);
      for (int r = 0; r < R; ++r) {
        const float* xr = x + r * ldx + c;
        even[r] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xr), even[r]);
        odd[r] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xr + 16), odd[r]);
      }
    }
  } else {
    SPECULA_UNROLL(8)
    for (int c = 0; c < GS; c += 32) {
      __m512 q0, q1;
      if constexpr (BITS == 8) {
        q0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wg + c))));
        q1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wg + c + 16))));
      } else {
        q0 = unpack16<BITS>(wg + c * BITS / 8);
        q1 = unpack16<BITS>(wg + (c + 16) * BITS / 8);
      }
      for (int r = 0; r < R; ++r) {
        even[r] = _mm512_fmadd_ps(q0, _mm512_loadu_ps(x + r * ldx + c), even[r]);
        odd[r] = _mm512_fmadd_ps(q1, _mm512_loadu_ps(x + r * ldx + c + 16), odd[r]);
      }
    }
  }
}

// Widens `count` BF16/F16/F32 values to f32 in dst, zero-filling up to the next multiple of 16.
inline void widen_row(const uint8_t* src, DType t, int64_t count, float* dst) {
  for (int64_t i = 0; i < count; i += 16) {
    const int64_t n = min64(16, count - i);
    const __mmask16 mask = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1u);
    __m512 v;
    if (t == DType::F32) {
      v = _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(src) + i);
    } else {
      const __m256i h = _mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(src) + i);
      if (t == DType::BF16) {
        v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      } else {
        v = _mm512_cvtph_ps(h);
      }
    }
    _mm512_storeu_ps(dst + i, v);
  }
}

// One W row against R X rows: out[r * ldo] = y[r][n].
template <int BITS, int GS, int R>
void affine_row(const uint8_t* wrow, const float* s, const float* b, int64_t groups, int64_t groups_padded,
                const float* x, int64_t ldx, const float* xsum, float* out, int64_t ldo) {
  __m512 acc[R], even[R], odd[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  constexpr int64_t kGroupBytes = GS * BITS / 8;
  for (int64_t g = 0; g < groups; ++g) {
    group_dot<BITS, GS, R>(wrow + g * kGroupBytes, x + g * GS, ldx, even, odd);
    const __m512 sg = _mm512_set1_ps(s[g]);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(sg, _mm512_add_ps(even[r], odd[r]), acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    // Bias term: sum_g b_g * xsum_r[g] over the zero-padded group vectors.
    const float* xs = xsum + r * groups_padded;
    __m512 bacc = _mm512_setzero_ps();
    for (int64_t i = 0; i < groups_padded; i += 16) {
      bacc = _mm512_fmadd_ps(_mm512_loadu_ps(b + i), _mm512_loadu_ps(xs + i), bacc);
    }
    out[r * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r], bacc));
  }
}

using AffineRowFn = void (*)(const uint8_t*, const float*, const float*, int64_t, int64_t, const float*, int64_t,
                             const float*, float*, int64_t);

template <int BITS, int GS>
struct AffineKernels {
  static constexpr AffineRowFn by_rows[kMatmulRowBlock] = {
      affine_row<BITS, GS, 1>, affine_row<BITS, GS, 2>, affine_row<BITS, GS, 3>, affine_row<BITS, GS, 4>,
      affine_row<BITS, GS, 5>, affine_row<BITS, GS, 6>, affine_row<BITS, GS, 7>, affine_row<BITS, GS, 8>};
};

template <int BITS>
void prepare_affine(MatmulJob& job) {
  const float* x = job.x;
  const int64_t m = job.m, ldx = job.ldx;
  const int64_t k = job.w->cols;
  const int gs = job.w->group_size;
  const int64_t groups = job.groups;
  const int64_t gp = job.groups_padded;

  // Per-call preparation of X (depends only on each X row, so it is batch invariant).
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * ldx;
    float* sums = job.x_group_sums + i * gp;
    for (int64_t g = 0; g < groups; ++g) {
      float sum = 0.0f;
      for (int64_t j = g * gs; j < (g + 1) * gs; ++j) sum += xi[j];
      sums[g] = sum;
    }
  }
  if constexpr (BITS == 4) {
    // Byte t of a 32-code block holds codes 2t (low nibble) and 2t+1 (high nibble).
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * ldx;
      float* pi = job.x_perm + i * k;
      for (int64_t blk = 0; blk < k; blk += 32) {
        for (int t = 0; t < 16; ++t) {
          pi[blk + t] = xi[blk + 2 * t];
          pi[blk + 16 + t] = xi[blk + 2 * t + 1];
        }
      }
    }
    job.xk = job.x_perm;
    job.ldxk = k;
  }
}

template <int BITS>
void affine_rows(const MatmulJob& job, int worker, int64_t n0, int64_t n1) {
  const WeightMatrix& w = *job.w;
  const int64_t m = job.m, ldy = job.ldy;
  const int gs = w.group_size;
  const int64_t groups = job.groups;
  const int64_t gp = job.groups_padded;
  float* y = job.y;

  const AffineRowFn* kernels = gs == 32   ? AffineKernels<BITS, 32>::by_rows
                               : gs == 64 ? AffineKernels<BITS, 64>::by_rows
                                          : AffineKernels<BITS, 128>::by_rows;
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  const auto* biases = static_cast<const uint8_t*>(w.biases);
  const int64_t row_bytes = w.row_bytes();
  const int64_t sb_row_bytes = groups * static_cast<int64_t>(dtype_size(w.scale_dtype));
  const float* xsum = job.x_group_sums;
  float* s = job.worker_rows + static_cast<int64_t>(worker) * 2 * gp;
  float* b = s + gp;
  for (int64_t t0 = n0; t0 < n1; t0 += kMatmulGrain) {
    const int64_t t1 = min64(n1, t0 + kMatmulGrain);
    for (int64_t m0 = 0; m0 < m; m0 += kMatmulRowBlock) {
      const AffineRowFn kernel = kernels[min64(kMatmulRowBlock, m - m0) - 1];
      for (int64_t n = t0; n < t1; ++n) {
        widen_row(scales + n * sb_row_bytes, w.scale_dtype, groups, s);
        widen_row(biases + n * sb_row_bytes, w.scale_dtype, groups, b);
        kernel(wdata + n * row_bytes, s, b, groups, gp, job.xk + m0 * job.ldxk, job.ldxk, xsum + m0 * gp,
               y + m0 * ldy + n, ldy);
      }
    }
  }
}

// ---- dense -----------------------------------------------------------------------------------

template <WeightFormat F>
inline __m512 load_dense(const void* row, int64_t k, __mmask16 mask) {
  if constexpr (F == WeightFormat::F32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(row) + k);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(row) + k);
    if constexpr (F == WeightFormat::BF16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

template <WeightFormat F, int R>
void dense_row(const void* wrow, int64_t k, const float* x, int64_t ldx, float* out, int64_t ldo) {
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const __mmask16 all = 0xffff;
  int64_t j = 0;
  for (; j + 32 <= k; j += 32) {
    const __m512 w0 = load_dense<F>(wrow, j, all);
    const __m512 w1 = load_dense<F>(wrow, j + 16, all);
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + r * ldx + j), acc0[r]);
      acc1[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + r * ldx + j + 16), acc1[r]);
    }
  }
  for (; j < k; j += 16) {
    const int64_t n = min64(16, k - j);
    const __mmask16 mask = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1u);
    const __m512 w0 = load_dense<F>(wrow, j, mask);
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mask, x + r * ldx + j), acc0[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

using DenseRowFn = void (*)(const void*, int64_t, const float*, int64_t, float*, int64_t);

template <WeightFormat F>
void dense_rows(const MatmulJob& job, int, int64_t n0, int64_t n1) {
  const WeightMatrix& w = *job.w;
  const float* x = job.x;
  const int64_t m = job.m, ldx = job.ldx, ldy = job.ldy;
  float* y = job.y;
  static constexpr DenseRowFn kernels[kMatmulRowBlock] = {dense_row<F, 1>, dense_row<F, 2>, dense_row<F, 3>,
                                                          dense_row<F, 4>, dense_row<F, 5>, dense_row<F, 6>,
                                                          dense_row<F, 7>, dense_row<F, 8>};
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = w.row_bytes();
  for (int64_t t0 = n0; t0 < n1; t0 += kMatmulGrain) {
    const int64_t t1 = min64(n1, t0 + kMatmulGrain);
    for (int64_t m0 = 0; m0 < m; m0 += kMatmulRowBlock) {
      const DenseRowFn kernel = kernels[min64(kMatmulRowBlock, m - m0) - 1];
      for (int64_t n = t0; n < t1; ++n) {
        kernel(wdata + n * row_bytes, w.cols, x + m0 * ldx, ldx, y + m0 * ldy + n, ldy);
      }
    }
  }
}

}  // namespace

void matmul_avx512_prepare(MatmulJob& job) {
  if (job.w->format != WeightFormat::Affine) return;
  switch (job.w->bits) {
    case 2: prepare_affine<2>(job); return;
    case 3: prepare_affine<3>(job); return;
    case 4: prepare_affine<4>(job); return;
    case 5: prepare_affine<5>(job); return;
    case 6: prepare_affine<6>(job); return;
    default: prepare_affine<8>(job); return;
  }
}

void matmul_avx512_rows(const MatmulJob& job, int worker, int64_t n0, int64_t n1) {
  switch (job.w->format) {
    case WeightFormat::F32: dense_rows<WeightFormat::F32>(job, worker, n0, n1); return;
    case WeightFormat::BF16: dense_rows<WeightFormat::BF16>(job, worker, n0, n1); return;
    case WeightFormat::F16: dense_rows<WeightFormat::F16>(job, worker, n0, n1); return;
    case WeightFormat::Affine: break;
  }
  switch (job.w->bits) {
    case 2: affine_rows<2>(job, worker, n0, n1); return;
    case 3: affine_rows<3>(job, worker, n0, n1); return;
    case 4: affine_rows<4>(job, worker, n0, n1); return;
    case 5: affine_rows<5>(job, worker, n0, n1); return;
    case 6: affine_rows<6>(job, worker, n0, n1); return;
    default: affine_rows<8>(job, worker, n0, n1); return;
  }
}

}  // namespace specula::detail
