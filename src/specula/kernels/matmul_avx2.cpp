// AVX2 + FMA + F16C matmul kernels (8 floats per vector). Built with AVX2 flags; called only when
// the CPU has them. Same structure and invariance argument as matmul_avx512.cpp:
// each output element has one fixed instruction sequence whatever the number of X rows handled
// together (template parameter R), the row's position in the batch and the thread count.
//
// No standard-library templates here (see MatmulJob).
#include <immintrin.h>

#include <cstring>

#include "specula/kernels/matmul_kernels.h"

namespace specula::detail {

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Fixed-order horizontal sum of 8 floats.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// ---- unpacking -------------------------------------------------------------------------------

// Generic unpack of 8 consecutive b-bit codes (b bytes): the bytes are broadcast to both 128-bit
// lanes, the (one or two) bytes holding code l are moved into dword l, then shift and mask.
struct UnpackTables {
  alignas(32) int8_t shuffle[32];
  alignas(32) int32_t shift[8];
};

constexpr UnpackTables make_unpack_tables(int bits) {
  UnpackTables t{};
  for (int l = 0; l < 8; ++l) {
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
inline __m256 unpack8(const uint8_t* p) {
  uint64_t raw = 0;
  std::memcpy(&raw, p, BITS);  // exactly the BITS bytes of the 8 codes
  const __m256i all = _mm256_broadcastsi128_si256(_mm_cvtsi64_si128(static_cast<long long>(raw)));
  const __m256i sel =
      _mm256_shuffle_epi8(all, _mm256_load_si256(reinterpret_cast<const __m256i*>(Unpack<BITS>::tables.shuffle)));
  const __m256i v =
      _mm256_srlv_epi32(sel, _mm256_load_si256(reinterpret_cast<const __m256i*>(Unpack<BITS>::tables.shift)));
  return _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32((1 << BITS) - 1)));
}

inline __m128i load8_bytes(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

template <int BITS, int R>
inline void group_dot(const uint8_t* wg, int gs, const float* x, int64_t ldx, __m256* gacc) {
  for (int r = 0; r < R; ++r) gacc[r] = _mm256_setzero_ps();
  if constexpr (BITS == 4) {
    const __m256i low = _mm256_set1_epi32(15);
    for (int c = 0; c < gs; c += 16) {
      const __m256i b = _mm256_cvtepu8_epi32(load8_bytes(wg + c / 2));
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(b, low));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
      for (int r = 0; r < R; ++r) {
        const float* xr = x + r * ldx + c;
        gacc[r] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(xr), gacc[r]);
        gacc[r] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(xr + 8), gacc[r]);
      }
    }
  } else {
    for (int c = 0; c < gs; c += 8) {
      __m256 q;
      if constexpr (BITS == 8) {
        q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(load8_bytes(wg + c)));
      } else {
        q = unpack8<BITS>(wg + c * BITS / 8);
      }
      for (int r = 0; r < R; ++r) gacc[r] = _mm256_fmadd_ps(q, _mm256_loadu_ps(x + r * ldx + c), gacc[r]);
    }
  }
}

// Widens `count` BF16/F16/F32 values to f32 in dst (the tail up to groups_padded stays zero).
inline void widen_row(const uint8_t* src, DType t, int64_t count, float* dst) {
  if (t == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  const auto* h = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    const __m256 f =
        t == DType::BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)) : _mm256_cvtph_ps(v);
    _mm256_storeu_ps(dst + i, f);
  }
  for (; i < count; ++i) {
    if (t == DType::BF16) {
      const uint32_t bits = uint32_t{h[i]} << 16;
      std::memcpy(dst + i, &bits, sizeof bits);
    } else {
      dst[i] = _cvtsh_ss(h[i]);
    }
  }
}

template <int BITS, int R>
void affine_row(const uint8_t* wrow, const float* s, const float* b, int64_t groups, int gs, int64_t groups_padded,
                const float* x, int64_t ldx, const float* xsum, float* out, int64_t ldo) {
  __m256 acc[R], gacc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t group_bytes = gs * BITS / 8;
  for (int64_t g = 0; g < groups; ++g) {
    group_dot<BITS, R>(wrow + g * group_bytes, gs, x + g * gs, ldx, gacc);
    const __m256 sg = _mm256_broadcast_ss(s + g);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(sg, gacc[r], acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    const float* xs = xsum + r * groups_padded;
    __m256 bacc = _mm256_setzero_ps();
    for (int64_t i = 0; i < groups_padded; i += 8) {
      bacc = _mm256_fmadd_ps(_mm256_loadu_ps(b + i), _mm256_loadu_ps(xs + i), bacc);
    }
    out[r * ldo] = hsum(_mm256_add_ps(acc[r], bacc));
  }
}

using AffineRowFn = void (*)(const uint8_t*, const float*, const float*, int64_t, int, int64_t, const float*, int64_t,
                             const float*, float*, int64_t);

template <int BITS>
void prepare_affine(MatmulJob& job) {
  const float* x = job.x;
  const int64_t m = job.m, ldx = job.ldx;
  const int64_t k = job.w->cols;
  const int gs = job.w->group_size;
  const int64_t groups = job.groups;
  const int64_t gp = job.groups_padded;

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
    // Byte t of a 16-code block (8 bytes) holds codes 2t (low nibble) and 2t+1 (high nibble).
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * ldx;
      float* pi = job.x_perm + i * k;
      for (int64_t blk = 0; blk < k; blk += 16) {
        for (int t = 0; t < 8; ++t) {
          pi[blk + t] = xi[blk + 2 * t];
          pi[blk + 8 + t] = xi[blk + 2 * t + 1];
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

  static constexpr AffineRowFn kernels[kMatmulRowBlock] = {
      affine_row<BITS, 1>, affine_row<BITS, 2>, affine_row<BITS, 3>, affine_row<BITS, 4>,
      affine_row<BITS, 5>, affine_row<BITS, 6>, affine_row<BITS, 7>, affine_row<BITS, 8>};
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
        kernel(wdata + n * row_bytes, s, b, groups, gs, gp, job.xk + m0 * job.ldxk, job.ldxk, xsum + m0 * gp,
               y + m0 * ldy + n, ldy);
      }
    }
  }
}

// ---- dense -----------------------------------------------------------------------------------

template <WeightFormat F>
inline __m256 load_dense(const void* row, int64_t k) {
  if constexpr (F == WeightFormat::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + k);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + k));
    if constexpr (F == WeightFormat::BF16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

template <WeightFormat F, int R>
void dense_row(const void* wrow, int64_t k, const float* x, int64_t ldx, float* out, int64_t ldo) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    const __m256 w0 = load_dense<F>(wrow, j);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * ldx + j), acc[r]);
  }
  if (j < k) {
    // Tail: copy the last k - j weights and inputs into zero-padded vectors.
    constexpr int64_t kElem = F == WeightFormat::F32 ? 4 : 2;
    alignas(32) uint8_t wtail[32] = {};
    std::memcpy(wtail, static_cast<const uint8_t*>(wrow) + j * kElem, static_cast<size_t>((k - j) * kElem));
    const __m256 w0 = load_dense<F>(wtail, 0);
    for (int r = 0; r < R; ++r) {
      alignas(32) float xtail[8] = {};
      std::memcpy(xtail, x + r * ldx + j, static_cast<size_t>(k - j) * sizeof(float));
      acc[r] = _mm256_fmadd_ps(w0, _mm256_load_ps(xtail), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r * ldo] = hsum(acc[r]);
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

void matmul_avx2_prepare(MatmulJob& job) {
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

void matmul_avx2_rows(const MatmulJob& job, int worker, int64_t n0, int64_t n1) {
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
