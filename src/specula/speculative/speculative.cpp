#include "specula/speculative/speculative.h"

#include <chrono>

#include "specula/speculative/speculative_session.h"
#include "specula/util/elapsed.h"

namespace specula {

SpeculativeResult generate_speculative(const TargetModel& model, TargetCache& cache, const Drafter* drafter,
                                       std::span<const int32_t> prompt, const SpeculativeOptions& options,
                                       ThreadPool& pool, const std::function<bool(int32_t)>& on_token) {
  SpeculativeSession session(model, cache, drafter, prompt, options, on_token);
  ForwardScratch scratch;
  while (!session.finished()) {
    const SequenceRows rows = session.next_step(cache.options().max_chunk, pool);
    const auto t0 = std::chrono::steady_clock::now();
    const ForwardOutput out = model.forward(cache, rows.tokens, rows.request, pool, &scratch);
    session.complete_step(out, ms_since(t0));
  }
  return session.take_result();
}

}  // namespace specula
