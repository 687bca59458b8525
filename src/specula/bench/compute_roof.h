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
#include <vector>

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

// The rate of work a fraction `share_b` (0..1) of whose bytes goes at rates `b` and the rest at
// rates `a`, for every width both have: 1 / ((1 - share_b) / a + share_b / b).
std::map<int64_t, double> blend_rates(const std::map<int64_t, double>& a, const std::map<int64_t, double>& b,
                                      double share_b);

// The least time (ms) a forward of w rows can take on this machine, for every w of `roof`:
// max(bytes / bandwidth, bytes / roof[w]), where a rate above a narrower width's counts as that
// width's (more rows never take less). Empty without roof[1] or a positive bandwidth.
std::map<int64_t, double> forward_floor_ms(const std::map<int64_t, double>& roof, double bandwidth_bytes_per_s,
                                           double bytes);

// The same rate for one width: a prefill chunk of `rows` X rows (the kernels then pass over the X
// rows in L2-sized groups for every block of W rows, as in a real prefill).
double measure_prefill_roof(const WeightMatrix& like, int64_t rows, Precision precision, ThreadPool& pool);

// The most tokens per second a prefill's matmuls can reach: a chunk multiplies every weight with
// `rows` rows, so it is bound by the kernels' in-cache rate at that width, `rate` weight bytes per
// second, times the rows over the weight bytes of one token. 0 unless every input is positive.
// Attention and the other per-row work come on top.
double prefill_roof_tok_per_s(double rate, int64_t rows, double bytes_per_token);

}  // namespace specula::bench
