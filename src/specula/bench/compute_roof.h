#pragma once
// The matmul kernels' own speed with the weights in cache: the compute roof beside the memory roof
// (the measured read bandwidth). A forward of w rows reads every weight byte once and multiplies it
// with w rows, so on this machine it cannot take less than
//   max(bytes / read bandwidth, bytes / in-cache rate of w rows).
// With one row the first term wins (decode is memory-bound); with more rows the second can: then
// verifying w tokens costs more than one decode step however well loads and multiplies overlap.
// The bench prints these floors beside the measured forwards.
#include <cstdint>
#include <map>

#include "specula/kernels/matmul.h"
#include "specula/kernels/weight_matrix.h"
#include "specula/util/thread_pool.h"

namespace specula::bench {

// Weight bytes per second that matmuls of 1..max_rows X rows get through with every thread of
// `pool` busy and the weights in each core's L2: a matrix in `like`'s storage format (the model's
// LM head, say) with 512 W rows per thread, K = like.cols, timed in `precision` (the best of 5
// passes over the widths in turn, >= 20 ms per width and pass). Keyed by X rows.
std::map<int64_t, double> measure_compute_roof(const WeightMatrix& like, int64_t max_rows, Precision precision,
                                               ThreadPool& pool);

// The least time (ms) a forward of w rows can take on this machine, for every w of `roof`:
// max(bytes / bandwidth, bytes / roof[w]), where a rate above a narrower width's counts as that
// width's (more rows never take less). Empty without roof[1] or a positive bandwidth.
std::map<int64_t, double> forward_floor_ms(const std::map<int64_t, double>& roof, double bandwidth_bytes_per_s,
                                           double bytes);

}  // namespace specula::bench
