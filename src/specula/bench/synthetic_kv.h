#pragma once
// Fills a sequence's KV caches with pseudo-random rows instead of running a prefill: what the
// long-context benchmark needs to put a model at a context of tens of thousands of positions in
// seconds. Attention reads every cached row the same way whatever its values, so the time of a
// decode step or a verify forward at that context is the time it has after a real prompt. The rows
// have unit RMS per head, like the normed K and V rows a forward writes; the logits computed over
// them mean nothing.
#include <cstdint>

#include "specula/model/target_model.h"

namespace specula::bench {

// Appends `positions` positions of pseudo-random K/V rows (from `seed`) to every cache `cache`
// owns, and advances it. Rings get rows only for the positions they keep.
void fill_with_synthetic_rows(const TargetModel& model, TargetCache& cache, int64_t positions, uint32_t seed);

}  // namespace specula::bench
