// The weight bytes a decode step reads (TargetWeights::matrix_bytes_per_token and
// decode_bytes_per_token): apart from target_weights.cpp because counting the fast kernels'
// layout asks the matmul kernels which matrices they read packed.
#include <cstdint>

#include "specula/kernels/matmul.h"
#include "specula/kernels/packed_affine.h"
#include "specula/model/target_weights.h"

namespace specula {

bool prepare_for_fast_kernels(WeightMatrix& w) {
  use_shared_factors_where_they_pay(w);
  return packable(w) && fast_matmul_supported(w);
}

namespace {

uint64_t matrix_bytes(const WeightMatrix& w, MatrixBytes how) {
  if (how == MatrixBytes::FastPrecision) {
    WeightMatrix fast = w;
    if (prepare_for_fast_kernels(fast)) return static_cast<uint64_t>(packed_bytes(fast));
    return w.bytes();
  }
  return stored_or_packed_bytes(w, how == MatrixBytes::Packed);
}

}  // namespace

uint64_t TargetWeights::matrix_bytes_per_token(MatrixBytes how) const {
  return sum_over_decode_matrices([how](const WeightMatrix& w) { return matrix_bytes(w, how); });
}

uint64_t TargetWeights::decode_bytes_per_token(const CheckpointSummary& summary, MatrixBytes how) const {
  // Experts share one geometry: the summary counts top_k of them per MoE layer, as stored.
  const auto routed = [&](MatrixBytes as) {
    uint64_t b = 0;
    for (const TargetLayerWeights& L : layers) {
      if (!L.moe || L.expert_gate.empty()) continue;
      const uint64_t one =
          matrix_bytes(L.expert_gate[0], as) + matrix_bytes(L.expert_up[0], as) + matrix_bytes(L.expert_down[0], as);
      b += one * static_cast<uint64_t>(summary.top_k_experts);
    }
    return b;
  };
  const uint64_t stored = matrix_bytes_per_token(MatrixBytes::Stored) + routed(MatrixBytes::Stored);
  return summary.bytes_per_token - stored + matrix_bytes_per_token(how) + routed(how);
}

}  // namespace specula
