#pragma once
// Prompt-lookup drafting (no drafter model): propose the continuation of the most recent earlier
// occurrence of the context's trailing n-gram, trying the longest n first. Deterministic, so as a
// speculative-sampling proposal its q is a point mass on each proposed token.
#include <cstdint>
#include <span>
#include <vector>

namespace specula {

struct PromptLookupOptions {
  int64_t max_ngram = 3;  // longest suffix tried
  int64_t min_ngram = 1;  // shortest suffix tried
};

// Up to `count` proposed tokens (fewer, possibly none, when no earlier match has a continuation).
// context = prompt + every emitted token (the pending one last). Cost O(len(context) * max_ngram).
std::vector<int32_t> prompt_lookup_drafts(std::span<const int32_t> context, int64_t count,
                                          const PromptLookupOptions& options = {});

}  // namespace specula
