#include "specula/speculative/prompt_lookup.h"

#include <algorithm>

namespace specula {

std::vector<int32_t> prompt_lookup_drafts(std::span<const int32_t> context, int64_t count,
                                          const PromptLookupOptions& options) {
  std::vector<int32_t> out;
  const int64_t len = static_cast<int64_t>(context.size());
  if (count <= 0 || len < 2) return out;
  const int64_t lo = std::max<int64_t>(options.min_ngram, 1);
  for (int64_t n = std::min(options.max_ngram, len - 1); n >= lo; --n) {
    const int32_t* suffix = context.data() + (len - n);
    // Most recent earlier start i (i + n < len keeps at least one continuation token).
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, context.data() + i)) continue;
      const int64_t begin = i + n;
      const int64_t end = std::min(len, begin + count);
      out.assign(context.begin() + begin, context.begin() + end);
      return out;
    }
  }
  return out;
}

}  // namespace specula
