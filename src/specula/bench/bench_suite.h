#pragma once
// The `specula bench` suite: for one target checkpoint (and optionally its
// assistant drafter), at each thread count, the median over `runs` runs of
//  * plain generation after a long prompt: prefill tok/s, time to first token, decode tok/s;
//  * at that context: verify forwards of 2..max_verify_width rows and one drafter step, each
//    relative to one plain decode step;
//  * end-to-end speculative decoding at controlled acceptance (the real loop with the real
//    drafter, drafts forced right with probability p) over plain decoding of the same tokens timed
//    before and after the cases of each p, with the speedup expected from p, gamma and the
//    measured costs;
// plus load time and peak RSS. The machine's read bandwidth is measured by the same process
// (measure_bandwidths), so decode can be put against its roofline: bytes per token x tok/s / GB/s;
// and so is the kernels' in-cache speed (bench/compute_roof.h), the roof that verify widths meet.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "specula/kernels/kv_type.h"
#include "specula/kernels/matmul.h"
#include "specula/model/drafter.h"
#include "specula/util/median.h"

namespace specula::bench {

struct SuiteOptions {
  std::vector<int> threads = {1, 2};
  Precision precision = Precision::Fast;
  DrafterQuant draft_quant = DrafterQuant::Auto;
  DrafterHead draft_head = DrafterHead::Stored;
  KvType kv_type = KvType::F32;
  int64_t runs = 3;             // every figure is the median over this many runs
  int64_t prompt_tokens = 512;  // prefill / time-to-first-token prompt
  int64_t decode_tokens = 16;   // decode steps timed after it
  int64_t cost_repeats =
      5;  // calls per step-cost figure: the median for the target widths, the mean for the drafter (one figure per run)
  int64_t max_verify_width = 9;     // verify widths 2..this (gamma + 1); covers auto's largest gamma
  int64_t spec_prompt_tokens = 16;  // prompt of the speculative runs (each run prefills it again)
  int64_t spec_tokens = 32;         // tokens generated per speculative (and matching plain) run
  std::vector<double> acceptance = {0.0, 0.3, 0.5, 0.7, 0.9};
  std::vector<std::string> gammas = {"1", "2", "3", "4", "auto"};
  int64_t auto_max_gamma = 8;  // `--gamma auto`'s largest gamma (as `specula run` uses it)
  uint64_t bandwidth_bytes = 1ull << 30;
  uint32_t seed = 1;
  std::string packed_cache_dir;  // TargetOptions::packed_cache_dir ("" = no cache file)

  // The --quick settings: a few tokens, one run, a smaller bandwidth buffer (for tests).
  static SuiteOptions quick();
  // Throws specula::Error naming the option and its value when one is out of range.
  void validate() const;
};

struct SpecFigure {
  double p = 0.0;
  std::string gamma;             // "1".."N" or "auto"
  double plain_tok_per_s = 0.0;  // plain decoding of the same tokens around the cases of this p
  double spec_tok_per_s = 0.0;
  double speedup = 0.0;           // median over runs of spec / plain
  double expected_speedup = 0.0;  // from p, gamma and the measured costs (auto: the best gamma)
  double ideal_speedup = 0.0;     // free drafting and verification (auto: its largest gamma)
  double acceptance_rate = 0.0;   // accepted / drafted (follows p)
  double mean_gamma = 0.0;        // drafts per round (auto: what the policy chose)
};

struct ThreadFigures {
  int threads = 1;
  double prefill_tok_per_s = 0.0;
  double ttft_ms = 0.0;
  double decode_tok_per_s = 0.0;
  double decode_ms_per_token = 0.0;
  double decode_cpu_ms_per_token = 0.0;         // process CPU time (all threads) per decode token
  double step_decode_ms = 0.0;                  // the decode step the cost ratios divide by
  std::map<int64_t, double> verify_cost_ratio;  // rows -> verify forward / decode step
  // rows -> weight bytes per second the matmul kernels get through with the weights in cache
  // (bench/compute_roof.h), 1..max_verify_width rows.
  std::map<int64_t, double> compute_roof_bytes_per_s;
  // The same at the width of one prefill chunk (prefill_roof_rows X rows).
  double prefill_roof_bytes_per_s = 0.0;
  int64_t prefill_roof_rows = 0;
  std::optional<double> draft_step_ms;  // with a drafter
  std::optional<double> draft_step_ratio;
  std::vector<SpecFigure> spec;  // with a drafter
};

struct ModelFigures {
  std::string name;
  std::string model_dir;
  std::string drafter_dir;  // empty: target only
  double load_ms = 0.0;
  double drafter_load_ms = 0.0;
  std::string drafter_weights;   // "as stored", or the affine copies and candidate head made at load (model/drafter.h)
  uint64_t bytes_per_token = 0;  // weight bytes one decode step streams
  // What a prompt token of a prefill multiplies: bytes_per_token less the LM head (a prefill takes
  // the logits of its last row only).
  uint64_t prefill_bytes_per_token = 0;
  uint64_t bytes_on_disk = 0;
  uint64_t drafter_bytes_on_disk = 0;
  uint64_t kv_bytes = 0;  // KV allocated at the longest context measured
  uint64_t peak_rss_bytes = 0;
  bool peak_rss_isolated = false;  // false: the peak counts from process start
  std::vector<ThreadFigures> threads;
};

struct ModelToBench {
  std::string name;
  std::string model_dir;
  std::string drafter_dir;  // optional
};

using Log = std::function<void(const std::string&)>;

// Runs the suite on one model; `log` gets one line per finished run.
ModelFigures bench_model(const ModelToBench& model, const SuiteOptions& options, const Log& log);

// The machine's read bandwidth (GB/s) at each thread count of the options.
std::map<int, double> measure_bandwidths(const SuiteOptions& options, const Log& log);

using specula::median;  // util/median.h

}  // namespace specula::bench
