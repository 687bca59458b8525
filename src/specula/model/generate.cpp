#include "specula/model/generate.h"

#include <algorithm>
#include <chrono>

#include "specula/kernels/softmax.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"

namespace specula {

GenerateResult generate_greedy(const TargetModel& model, TargetCache& cache, std::span<const int32_t> prompt,
                               const GenerateOptions& options, ThreadPool& pool,
                               const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) fail("generate: the prompt is empty (it must hold at least the BOS token)");
  if (options.max_tokens < 0) fail("generate: max tokens {} must be >= 0", options.max_tokens);
  const std::vector<int32_t> eos = model.eos_token_ids();
  auto is_eos = [&](int32_t t) { return !options.ignore_eos && std::binary_search(eos.begin(), eos.end(), t); };

  GenerateResult res;
  res.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  res.stop_reason = "max_tokens";
  cache.reset();
  if (options.max_tokens == 0) return res;

  ForwardRequest last;
  last.rows = OutputRows::Last;
  auto t0 = std::chrono::steady_clock::now();
  ForwardOutput out = model.forward(cache, prompt, last, pool);
  res.stats.prefill_ms = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (;;) {
    const int32_t next = static_cast<int32_t>(argmax(out.logits_row(0), out.vocab_size));
    if (is_eos(next)) {
      res.stop_reason = "eos";
      break;
    }
    res.tokens.push_back(next);
    if (on_token && !on_token(next)) {
      res.stop_reason = "callback";
      break;
    }
    if (static_cast<int64_t>(res.tokens.size()) >= options.max_tokens) break;
    if (cache.offset() + 1 > model.max_context()) {
      res.stop_reason = "context";
      break;
    }
    out = model.forward(cache, std::span<const int32_t>(&res.tokens.back(), 1), last, pool);
  }
  res.stats.decode_ms = ms_since(t0);
  res.stats.generated_tokens = static_cast<int64_t>(res.tokens.size());
  return res;
}

}  // namespace specula
