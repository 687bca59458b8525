#include "specula/bench/compute_roof.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "specula/kernels/packed_affine.h"
#include "specula/util/error.h"
#include "specula/util/half.h"

namespace specula::bench {

namespace {

using Clock = std::chrono::steady_clock;

// 512 rows of K = 2560 at 4-bit g64 are ~0.7 MiB: inside a 1 MiB L2 with room for X and Y.
constexpr int64_t kRowsPerThread = 512;
constexpr double kPassSeconds = 0.02;  // each pass repeats the matmul for at least this long
constexpr int kPasses = 5;

// A small value in `t` (no NaN, Inf or subnormal scales that would slow the float work).
void fill_small(void* out, size_t count, DType t) {
  if (t == DType::F32) {
    std::fill_n(static_cast<float*>(out), count, 0.01f);
    return;
  }
  const uint16_t v = t == DType::F16 ? f32_to_f16(0.01f) : f32_to_bf16(0.01f);
  std::fill_n(static_cast<uint16_t*>(out), count, v);
}

// Weight bytes per second of matmuls of each of `widths` X rows (see measure_compute_roof).
std::map<int64_t, double> in_cache_rates(const WeightMatrix& like, const std::vector<int64_t>& widths,
                                         Precision precision, ThreadPool& pool) {
  int64_t max_rows = 0;
  for (int64_t m : widths) {
    if (m < 1) fail("bench: compute roof rows {} must be >= 1", m);
    max_rows = std::max(max_rows, m);
  }
  if (max_rows < 1) fail("bench: compute roof needs a width");
  if (like.cols < 1) fail("bench: compute roof needs a matrix with K >= 1 (got {})", like.cols);
  WeightMatrix w;
  w.format = like.format;
  w.rows = kRowsPerThread * pool.size();
  w.cols = like.cols;
  w.bits = like.bits;
  w.group_size = like.group_size;
  w.scale_dtype = like.scale_dtype;
  // Codes: any bits are valid affine codes; dense weights get small finite values.
  std::vector<uint8_t> data(static_cast<size_t>(w.rows * w.row_bytes()));
  if (w.format == WeightFormat::Affine) {
    std::mt19937_64 rng(7);
    for (size_t i = 0; i + 8 <= data.size(); i += 8) {
      const uint64_t r = rng();
      std::memcpy(&data[i], &r, 8);
    }
  } else {
    const DType t = w.format == WeightFormat::F32   ? DType::F32
                    : w.format == WeightFormat::F16 ? DType::F16
                                                    : DType::BF16;
    fill_small(data.data(), data.size() / dtype_size(t), t);
  }
  w.data = data.data();
  std::vector<uint8_t> params;
  PackedBuffer packed;
  if (w.format == WeightFormat::Affine) {
    const size_t per = static_cast<size_t>(w.rows * w.groups_per_row());
    params.resize(2 * per * dtype_size(w.scale_dtype));
    fill_small(params.data(), 2 * per, w.scale_dtype);
    w.scales = params.data();
    w.biases = params.data() + per * dtype_size(w.scale_dtype);
    if (is_low_precision(precision) && fast_matmul_supported(w)) {
      WeightMatrix* one[] = {&w};
      packed = pack_matrices(one, pool);  // the layout a loaded model's fast kernels read
    }
  }
  std::vector<float> x(static_cast<size_t>(max_rows * w.cols));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (float& v : x) v = uni(rng);
  std::vector<float> y(static_cast<size_t>(max_rows * w.rows));
  const double bytes = static_cast<double>(w.bytes());

  // Passes over every width in turn, the best of each width kept: a slow stretch of this machine
  // (another tenant, a preempted vCPU) lowers some samples, never raises one.
  for (int64_t m : widths) matmul(x.data(), m, w.cols, w, y.data(), w.rows, pool, precision);  // warm
  std::map<int64_t, double> out;
  for (int pass = 0; pass < kPasses; ++pass) {
    for (int64_t m : widths) {
      int64_t calls = 0;
      const auto t0 = Clock::now();
      double s = 0.0;
      do {
        matmul(x.data(), m, w.cols, w, y.data(), w.rows, pool, precision);
        ++calls;
        s = std::chrono::duration<double>(Clock::now() - t0).count();
      } while (s < kPassSeconds);
      out[m] = std::max(out[m], bytes * static_cast<double>(calls) / s);
    }
  }
  return out;
}

}  // namespace

std::map<int64_t, double> measure_compute_roof(const WeightMatrix& like, int64_t max_rows, Precision precision,
                                               ThreadPool& pool) {
  if (max_rows < 1) fail("bench: compute roof rows {} must be >= 1", max_rows);
  std::vector<int64_t> widths;
  for (int64_t m = 1; m <= max_rows; ++m) widths.push_back(m);
  return in_cache_rates(like, widths, precision, pool);
}

double measure_prefill_roof(const WeightMatrix& like, int64_t rows, Precision precision, ThreadPool& pool) {
  return in_cache_rates(like, {rows}, precision, pool).at(rows);
}

std::map<int64_t, double> blend_rates(const std::map<int64_t, double>& a, const std::map<int64_t, double>& b,
                                      double share_b) {
  if (!(share_b >= 0.0 && share_b <= 1.0)) fail("bench: rate share {} must be in [0, 1]", share_b);
  std::map<int64_t, double> out;
  for (const auto& [rows, ra] : a) {
    const auto it = b.find(rows);
    if (it == b.end() || !(ra > 0.0) || !(it->second > 0.0)) continue;
    out[rows] = 1.0 / ((1.0 - share_b) / ra + share_b / it->second);
  }
  return out;
}

std::map<int64_t, double> forward_floor_ms(const std::map<int64_t, double>& roof, double bandwidth_bytes_per_s,
                                           double bytes) {
  std::map<int64_t, double> out;
  if (roof.count(1) == 0 || bandwidth_bytes_per_s <= 0.0) return out;
  // A w-row matmul does all of a (w-1)-row one's work and more: a measured rate above a narrower
  // width's is timing noise and is clipped to it.
  double rate = roof.at(1);
  for (const auto& [rows, measured] : roof) {
    rate = std::min(rate, measured);
    out[rows] = 1e3 * bytes * std::max(1.0 / bandwidth_bytes_per_s, 1.0 / rate);
  }
  return out;
}

double prefill_roof_tok_per_s(double rate, int64_t rows, double bytes_per_token) {
  if (!(bytes_per_token > 0.0) || !(rate > 0.0) || rows < 1) return 0.0;
  return rate * static_cast<double>(rows) / bytes_per_token;
}

}  // namespace specula::bench
