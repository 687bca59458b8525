#include "specula/model/target_benchmark.h"

#include <ctime>

#include <chrono>
#include <vector>

#include "specula/model/generate.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"
#include "specula/util/median.h"

namespace specula {

namespace {

using Clock = std::chrono::steady_clock;

// What the speculative loop asks of a verify forward: logits and final-norm hidden of every row.
ForwardRequest verify_request() {
  ForwardRequest all;
  all.rows = OutputRows::All;
  all.hidden = true;
  return all;
}

double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

std::vector<int32_t> bench_prompt(int64_t vocab_size, int64_t length, uint32_t seed) {
  if (length < 1) fail("bench: prompt length {} must be >= 1", length);
  if (vocab_size < 4) fail("bench: vocabulary size {} must be >= 4", vocab_size);
  std::vector<int32_t> prompt{2};
  uint32_t s = seed;
  const auto span = static_cast<uint32_t>(vocab_size - 3);
  while (static_cast<int64_t>(prompt.size()) < length) {
    s = s * 1664525u + 1013904223u;  // LCG: the same prompt on every machine
    prompt.push_back(static_cast<int32_t>(3 + (s >> 8) % span));
  }
  return prompt;
}

GenerationTiming time_generation(const TargetModel& model, TargetCache& cache, std::span<const int32_t> prompt,
                                 int64_t decode_tokens, ThreadPool& pool) {
  if (decode_tokens < 1) fail("bench: decode tokens {} must be >= 1", decode_tokens);
  GenerateOptions go;
  go.max_tokens = decode_tokens + 1;
  go.ignore_eos = true;
  GenerationTiming t;
  t.prompt_tokens = static_cast<int64_t>(prompt.size());
  const auto t0 = Clock::now();
  double cpu_first = 0.0;  // process CPU time when the first token (the prefill's) arrived
  const GenerateResult r = generate_greedy(model, cache, prompt, go, pool, [&](int32_t) {
    if (t.ttft_ms == 0.0) {
      t.ttft_ms = ms_since(t0);
      cpu_first = process_cpu_ms();
    }
    return true;
  });
  const double cpu_decode = process_cpu_ms() - cpu_first;
  if (static_cast<int64_t>(r.tokens.size()) != decode_tokens + 1)
    fail("bench: generation stopped after {} of {} tokens ({})", r.tokens.size(), decode_tokens + 1, r.stop_reason);
  t.decode_tokens = decode_tokens;
  t.prefill_ms = r.stats.prefill_ms;
  t.prefill_tok_per_s = r.stats.prefill_tok_per_s();
  t.decode_ms_per_token = r.stats.decode_ms / static_cast<double>(decode_tokens);
  t.decode_tok_per_s = r.stats.decode_tok_per_s();
  t.decode_cpu_ms_per_token = cpu_decode / static_cast<double>(decode_tokens);
  t.tokens = r.tokens;
  return t;
}

TargetStepTimer::TargetStepTimer(const TargetModel& model, TargetCache& cache, int32_t token, int64_t max_width,
                                 ThreadPool& pool)
    : model_(model), cache_(cache), pool_(pool) {
  if (max_width < 2) fail("bench: verify width {} must be >= 2", max_width);
  if (cache.offset() < 1) fail("bench: step costs need a context of at least one position");
  if (cache.options().rollback_reserve < max_width)
    fail("bench: verify width {} exceeds the target's rollback reserve {}", max_width,
         cache.options().rollback_reserve);
  rows_.assign(static_cast<size_t>(max_width), token);
  samples_.resize(static_cast<size_t>(max_width + 1));
  model.forward(cache, std::span<const int32_t>(rows_), verify_request(), pool);
  cache.rollback(max_width);
}

void TargetStepTimer::sample() {
  ForwardRequest last;
  last.rows = OutputRows::Last;
  const ForwardRequest all = verify_request();
  for (size_t w = 1; w < samples_.size(); ++w) {
    const auto t0 = Clock::now();
    model_.forward(cache_, std::span<const int32_t>(rows_.data(), w), w == 1 ? last : all, pool_);
    samples_[w].push_back(ms_since(t0));
    cache_.rollback(static_cast<int64_t>(w));
  }
}

StepCosts TargetStepTimer::costs() const {
  if (samples_[1].empty()) fail("bench: no step was timed");
  StepCosts c;
  c.decode_ms = median(samples_[1]);
  c.verify_ms.assign(samples_.size(), 0.0);
  for (size_t w = 2; w < samples_.size(); ++w) c.verify_ms[w] = median(samples_[w]);
  return c;
}

StepCosts time_target_steps(const TargetModel& model, TargetCache& cache, int32_t token, int64_t max_width,
                            int64_t repeats, ThreadPool& pool) {
  if (repeats < 1) fail("bench: repeats {} must be >= 1", repeats);
  TargetStepTimer timer(model, cache, token, max_width, pool);
  for (int64_t i = 0; i < repeats; ++i) timer.sample();
  return timer.costs();
}

}  // namespace specula
