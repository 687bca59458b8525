#pragma once
// End-to-end speed of the target model (the `specula bench` measurements): prefill throughput on
// a prompt of random ids and per-token decode latency, at a given thread count, plus the weight
// bytes one decode step streams (to relate tok/s to memory bandwidth).
#include <cstdint>
#include <vector>

#include "specula/model/target_model.h"

namespace specula {

struct TargetBenchOptions {
  int64_t prompt_tokens = 512;
  int64_t decode_tokens = 16;
  uint32_t seed = 1;
};

struct TargetBenchRun {
  int threads = 1;
  int64_t prompt_tokens = 0;
  double prefill_ms = 0.0;
  double prefill_tok_per_s = 0.0;
  int64_t decode_tokens = 0;
  double decode_ms_median = 0.0;   // one decode step (one token)
  double decode_ms_min = 0.0;
  double decode_tok_per_s = 0.0;   // 1000 / median
  // Process CPU time (all threads) per unit of work: on a shared machine wall time includes the
  // time other processes held the CPUs; with 1 thread, CPU time estimates the unloaded wall time.
  double prefill_cpu_ms = 0.0;
  double decode_cpu_ms_per_token = 0.0;
};

// Weight bytes read by one decode step: every dense/quantized matrix once (the LM head included)
// and, on MoE layers, the top-k experts' matrices (sized as expert 0's).
uint64_t decode_weight_bytes(const TargetModel& model);

TargetBenchRun bench_target(const TargetModel& model, const TargetBenchOptions& options, ThreadPool& pool);

}  // namespace specula
