#include "specula/kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "specula/kernels/isa.h"
#include "specula/kernels/matmul_kernels.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/quant.h"
#include "specula/util/error.h"

namespace specula {

namespace detail {

// Scalar kernel: one dequantized W row (read once) serves every X row; per element the same
// k-ascending f32 sum as the reference, so it is bitwise equal to it.
void matmul_scalar(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy,
                   ThreadPool& pool) {
  const int64_t k = w.cols;
  pool.parallel_for(w.rows, kMatmulGrain, [&](int, int64_t n0, int64_t n1) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(k));
    for (int64_t n = n0; n < n1; ++n) {
      dequantize_row(w, n, row.data());
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x + i * ldx;
        float acc = 0.0f;
        for (int64_t j = 0; j < k; ++j) acc += xi[j] * row[j];
        y[i * ldy + n] = acc;
      }
    }
  });
}

}  // namespace detail

namespace {

void validate(int64_t m, int64_t ldx, const WeightMatrix& w, int64_t ldy) {
  if (m < 0) fail("matmul: negative row count {}", m);
  if (w.rows < 0 || w.cols < 0) fail("matmul: weight shape [{}, {}] is negative", w.rows, w.cols);
  if (ldx < w.cols) fail("matmul: x row stride {} is smaller than K = {}", ldx, w.cols);
  if (ldy < w.rows) fail("matmul: y row stride {} is smaller than N = {}", ldy, w.rows);
  if (w.rows > 0 && w.cols > 0 && w.data == nullptr) fail("matmul: weight [{}, {}] has no data", w.rows, w.cols);
  if (w.format != WeightFormat::Affine) return;
  if (!is_supported_bits(w.bits)) fail("matmul: {} quantization bits not supported (2,3,4,5,6,8)", w.bits);
  if (!is_supported_group_size(w.group_size)) {
    fail("matmul: group size {} not supported (16, 32, 64, 128)", w.group_size);
  }
  if (w.cols % w.group_size != 0 || (w.cols * w.bits) % 32 != 0) {
    fail("matmul: K = {} is not a multiple of group size {} (and of 32-bit words)", w.cols, w.group_size);
  }
  if (w.scale_dtype != DType::BF16 && w.scale_dtype != DType::F16 && w.scale_dtype != DType::F32) {
    fail("matmul: scale dtype {} not supported (BF16, F16, F32)", dtype_name(w.scale_dtype));
  }
  if (w.rows > 0 && w.cols > 0 && (w.scales == nullptr || w.biases == nullptr)) {
    fail("matmul: quantized weight [{}, {}] lacks scales or biases", w.rows, w.cols);
  }
}

// Which fast kernel runs w with the active kernel set on this CPU.
enum class FastKernel { None, Avx512Vnni, Avx2Int16, Avx512Bf16 };

FastKernel fast_kernel(const WeightMatrix& w) {
#if defined(SPECULA_X86)
  const Isa isa = active_isa();
  const CpuFeatures& f = cpu_features();
  // Every affine width has a packed layout (4-, 6- or 8-bit codes); groups of 16 (GGUF Q6_K) only
  // with codes of 5 bits or more.
  if (w.format == WeightFormat::Affine && packable(w)) {
    if (isa == Isa::Avx512 && f.avx512vnni) return FastKernel::Avx512Vnni;
    if (isa >= Isa::Avx2) return FastKernel::Avx2Int16;  // the same bytes, more instructions
  }
  if (w.format == WeightFormat::BF16 && isa == Isa::Avx512 && f.avx512bf16) return FastKernel::Avx512Bf16;
#else
  (void)w;
#endif
  return FastKernel::None;
}

#if defined(SPECULA_X86)
// Fast precision (kernels in matmul_fast_avx512.cpp and matmul_fast_avx2.cpp): quantize or round X
// once per call, then the W rows (affine: packed blocks of 16) split over the threads as in the
// exact kernels. An affine matrix without a packed copy is packed here per call: the same bytes as
// a pre-packed one, only slower (models pack theirs once at load; see kernels/packed_affine.h).
void matmul_fast(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy, ThreadPool& pool,
                 bool int8, FastKernel kernel) {
  // Scratch lives in the calling thread and is reused across calls (decode issues many).
  thread_local std::vector<int16_t> xq;
  thread_local std::vector<int8_t> xq8;
  thread_local std::vector<float> group_scales, group_sums;
  thread_local std::vector<uint16_t> xb;
  thread_local std::vector<uint8_t> packed;
  const bool avx2 = kernel == FastKernel::Avx2Int16;
  detail::FastJob job;
  job.x = x;
  job.m = m;
  job.ldx = ldx;
  job.w = &w;
  job.y = y;
  job.ldy = ldy;
  const int64_t blocks = (w.rows + kPackedRows - 1) / kPackedRows;
  if (w.format == WeightFormat::BF16) {
    job.ldb = (w.cols + 31) / 32 * 32;
    xb.resize(static_cast<size_t>(2 * m * job.ldb));
    job.xb = xb.data();
  } else {
    job.groups = w.groups_per_row();
    job.block_bytes = packed_block_bytes(w);
    job.params = {w.scale_dtype, packed_superblock_groups(w)};
    // AVX2 keeps int8 codes in int16 words for 8-bit weights (see matmul_fast_avx2.cpp).
    if (int8 && (!avx2 || packed_code_bits(w) == 4)) {
      xq8.resize(static_cast<size_t>(m * w.cols));
      job.xq8 = xq8.data();
    } else {
      xq.resize(static_cast<size_t>(m * w.cols));
      job.xq = xq.data();
      job.xq_int8_levels = int8;
    }
    group_scales.resize(static_cast<size_t>(m * job.groups));
    group_sums.resize(static_cast<size_t>(m * job.groups));
    job.x_group_scales = group_scales.data();
    job.x_group_sums = group_sums.data();
    // A matrix packed under another kernel set (another code width) is packed again here.
    job.packed = w.packed_bits == packed_code_bits(w) ? w.packed : nullptr;
    if (job.packed == nullptr) {
      packed.resize(static_cast<size_t>(packed_bytes(w)));
      uint8_t* out = packed.data();
      pool.parallel_for(blocks, 1, [&](int, int64_t b0, int64_t b1) { pack_affine_blocks(w, b0, b1, out); });
      job.packed = out;
    }
  }
  const auto prepare = avx2 ? detail::matmul_fast_avx2_prepare : detail::matmul_fast_avx512_prepare;
  // Each X row is prepared on its own, so splitting the rows over threads changes no byte; a
  // handful of decode rows is not worth the cross-core handoff.
  if (m >= detail::kMatmulRowBlock && pool.size() > 1) {
    pool.parallel_for(m, 1, [&](int, int64_t r0, int64_t r1) { prepare(job, r0, r1); });
  } else {
    prepare(job, 0, m);
  }
  if (w.format == WeightFormat::BF16) {
    pool.parallel_for_balanced(w.rows, detail::kMatmulGrain,
                               [&](int, int64_t n0, int64_t n1) { detail::matmul_fast_avx512_rows(job, n0, n1); });
  } else {
    const auto blocks_fn = avx2 ? detail::matmul_fast_avx2_blocks : detail::matmul_fast_avx512_blocks;
    pool.parallel_for_balanced(blocks, 1, [&](int, int64_t b0, int64_t b1) { blocks_fn(job, b0, b1); });
  }
}
#endif

}  // namespace

bool fast_matmul_supported(const WeightMatrix& w) { return fast_kernel(w) != FastKernel::None; }

const char* fast_kernel_name(const WeightMatrix& w, Precision precision) {
  if (!is_low_precision(precision)) return nullptr;
  const bool int8 = precision == Precision::Int8;
  switch (fast_kernel(w)) {
    case FastKernel::Avx512Vnni: return int8 ? "avx512 vnni int8" : "avx512 vnni";
    case FastKernel::Avx2Int16:
      if (!int8) return "avx2 int16";
      return packed_code_bits(w) == 4 ? "avx2 int8" : "avx2 int16 (int8 levels)";
    case FastKernel::Avx512Bf16: return "avx512 bf16";
    case FastKernel::None: break;
  }
  return nullptr;
}

std::string fast_kernels_summary(Precision precision) {
  if (!is_low_precision(precision)) return {};
  auto name = [&](WeightFormat format, int bits) {
    WeightMatrix w;
    w.format = format;
    w.bits = bits;
    w.rows = kPackedRows;
    w.cols = 128;
    w.group_size = 32;
    const char* n = fast_kernel_name(w, precision);
    return n != nullptr ? std::string(n) : std::string("fast→exact fallback");
  };
  // The packed code widths: 2-4-bit codes run as 4-bit, 5-8-bit ones as 6- or 8-bit.
  const std::string q4 = name(WeightFormat::Affine, 4), q8 = name(WeightFormat::Affine, 8);
  std::string s = std::string(precision_name(precision)) + ": ";
  s += q4 == q8 ? q4 + " for 2-8-bit, " : q4 + " for 2-4-bit, " + q8 + " for 5-8-bit, ";
  return s + name(WeightFormat::BF16, 0) + " for bf16";
}

void matmul(const float* x, int64_t m, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy, ThreadPool& pool,
            Precision precision) {
  validate(m, ldx, w, ldy);
  if (m == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(y + i * ldy, y + i * ldy + w.rows, 0.0f);
    return;
  }
  const Isa isa = active_isa();
#if defined(SPECULA_X86)
  if (is_low_precision(precision)) {
    if (const FastKernel kernel = fast_kernel(w); kernel != FastKernel::None) {
      matmul_fast(x, m, ldx, w, y, ldy, pool, precision == Precision::Int8, kernel);
      return;
    }
  }
  if (isa == Isa::Avx512 || isa == Isa::Avx2) {
    // Scratch lives in the calling thread and is reused across calls (decode issues many).
    thread_local std::vector<float> x_perm, x_group_sums, worker_rows;
    detail::MatmulJob job;
    job.x = x;
    job.m = m;
    job.ldx = ldx;
    job.w = &w;
    job.y = y;
    job.ldy = ldy;
    job.xk = x;
    job.ldxk = ldx;
    if (w.format == WeightFormat::Affine) {
      job.groups = w.groups_per_row();
      job.groups_padded = detail::padded_groups(w);
      if (w.bits == 4) x_perm.resize(static_cast<size_t>(m * w.cols));  // only 4-bit reorders X
      x_group_sums.assign(static_cast<size_t>(m * job.groups_padded), 0.0f);
      worker_rows.assign(static_cast<size_t>(pool.size() * 2 * job.groups_padded), 0.0f);
      job.x_perm = x_perm.data();
      job.x_group_sums = x_group_sums.data();
      job.worker_rows = worker_rows.data();
    }
    // The AVX-512 affine kernels take groups of 32 to 128; groups of 16 run the AVX2 ones.
    const bool wide = isa == Isa::Avx512 && !(w.format == WeightFormat::Affine && w.group_size == 16);
    (wide ? detail::matmul_avx512_prepare : detail::matmul_avx2_prepare)(job);
    const auto rows = wide ? detail::matmul_avx512_rows : detail::matmul_avx2_rows;
    pool.parallel_for_balanced(w.rows, detail::kMatmulGrain,
                               [&](int worker, int64_t n0, int64_t n1) { rows(job, worker, n0, n1); });
    return;
  }
#endif
  detail::matmul_scalar(x, m, ldx, w, y, ldy, pool);
}

}  // namespace specula

namespace specula {

Precision parse_precision(const std::string& text) {
  if (text == "exact") return Precision::Exact;
  if (text == "fast") return Precision::Fast;
  if (text == "int8") return Precision::Int8;
  fail("precision '{}' is not one of 'exact', 'fast', 'int8'", text);
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Exact: return "exact";
    case Precision::Fast: return "fast";
    case Precision::Int8: return "int8";
  }
  return "exact";
}

}  // namespace specula
