#include "specula/model/target_benchmark.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "specula/kernels/softmax.h"
#include "specula/util/error.h"

namespace specula {

namespace {
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}
}  // namespace

uint64_t decode_weight_bytes(const TargetModel& model) {
  const TargetWeights& w = model.weights();
  uint64_t b = w.streamed_bytes_per_token();
  const int64_t k = model.config().text.top_k_experts;
  for (const TargetLayerWeights& L : w.layers) {
    if (!L.moe || L.expert_gate.empty()) continue;
    b += static_cast<uint64_t>(k) * (L.expert_gate[0].bytes() + L.expert_up[0].bytes() + L.expert_down[0].bytes());
  }
  return b;
}

TargetBenchRun bench_target(const TargetModel& model, const TargetBenchOptions& options, ThreadPool& pool) {
  if (options.prompt_tokens < 1) fail("bench: prompt tokens {} must be >= 1", options.prompt_tokens);
  if (options.decode_tokens < 1) fail("bench: decode tokens {} must be >= 1", options.decode_tokens);
  if (options.prompt_tokens + options.decode_tokens > model.max_context())
    fail("bench: {} prompt + {} decode tokens exceed the context limit {}", options.prompt_tokens,
         options.decode_tokens, model.max_context());
  // Deterministic pseudo-random prompt, BOS first.
  std::vector<int32_t> prompt;
  prompt.push_back(2);
  uint32_t s = options.seed;
  while (static_cast<int64_t>(prompt.size()) < options.prompt_tokens) {
    s = s * 1664525u + 1013904223u;
    prompt.push_back(static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(model.vocab_size())));
  }
  TargetBenchRun run;
  run.threads = pool.size();
  run.prompt_tokens = options.prompt_tokens;
  run.decode_tokens = options.decode_tokens;
  TargetCache cache = model.new_cache();
  ForwardRequest last;
  last.rows = OutputRows::Last;
  double cpu0 = process_cpu_ms();
  auto t0 = std::chrono::steady_clock::now();
  ForwardOutput out = model.forward(cache, prompt, last, pool);
  run.prefill_cpu_ms = process_cpu_ms() - cpu0;
  run.prefill_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  run.prefill_tok_per_s = run.prefill_ms > 0 ? options.prompt_tokens * 1000.0 / run.prefill_ms : 0.0;

  std::vector<double> steps;
  cpu0 = process_cpu_ms();
  for (int64_t i = 0; i < options.decode_tokens; ++i) {
    const int32_t next = static_cast<int32_t>(argmax(out.logits_row(0), out.vocab_size));
    t0 = std::chrono::steady_clock::now();
    out = model.forward(cache, std::span<const int32_t>(&next, 1), last, pool);
    steps.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  run.decode_cpu_ms_per_token = (process_cpu_ms() - cpu0) / static_cast<double>(options.decode_tokens);
  std::sort(steps.begin(), steps.end());
  run.decode_ms_min = steps.front();
  run.decode_ms_median = steps[steps.size() / 2];
  run.decode_tok_per_s = run.decode_ms_median > 0 ? 1000.0 / run.decode_ms_median : 0.0;
  return run;
}

}  // namespace specula
