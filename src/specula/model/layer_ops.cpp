#include "specula/model/layer_ops.h"

#include "specula/kernels/activation.h"
#include "specula/kernels/rms_norm.h"

namespace specula {

void add_rows(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void rms_norm_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
                   float* y) {
  for_rows(pool, rows, dim,
           [&](int64_t r0, int64_t r1) { rms_norm(x + r0 * dim, r1 - r0, dim, dim, weight, eps, y + r0 * dim, dim); });
}

void add_normed_branch(ThreadPool& pool, float* x, float* branch, int64_t rows, int64_t dim, const float* norm,
                       float eps) {
  rms_norm_rows(pool, branch, rows, dim, norm, eps, branch);
  add_rows(x, branch, rows * dim);
}

void norm_and_rotate_heads(ThreadPool& pool, float* x, int64_t n, int64_t heads, int64_t head_dim, const float* norm,
                           float eps, const RopeFrequencies& freqs, const float* cos, const float* sin) {
  rms_norm_rows(pool, x, n * heads, head_dim, norm, eps, x);
  const int64_t width = heads * head_dim;
  const int64_t pairs = freqs.rotated_pairs();
  for (int64_t r = 0; r < n; ++r) rope_apply(x + r * width, heads, freqs, cos + r * pairs, sin + r * pairs);
}

void geglu_mlp(const float* in, int64_t n, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
               const std::optional<WeightMatrix>& gate_up, std::vector<float>& g, std::vector<float>& u, float* out,
               const Linear& linear) {
  const int64_t width = gate.rows;
  ensure(g, n * width);
  if (gate_up && is_low_precision(linear.precision_for(*gate_up)) && fast_matmul_supported(*gate_up)) {
    ensure(u, n * 2 * width);
    linear(in, n, *gate_up, u.data());  // row r: [gate | up]
    for_rows(linear.pool, n, width, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        gelu_tanh_mul(u.data() + r * 2 * width, u.data() + r * 2 * width + width, g.data() + r * width, width);
    });
  } else {
    ensure(u, n * width);
    linear(in, n, gate, g.data());
    linear(in, n, up, u.data());
    for_rows(linear.pool, n, width, [&](int64_t r0, int64_t r1) {
      gelu_tanh_mul(g.data() + r0 * width, u.data() + r0 * width, g.data() + r0 * width, (r1 - r0) * width);
    });
  }
  linear(g.data(), n, down, out);
}

}  // namespace specula
