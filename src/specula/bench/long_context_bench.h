#pragma once
// `specula bench --contexts 512,4096,16384,32768`: what decoding costs as the context grows. At
// each context the caches are filled with synthetic rows (bench/synthetic_kv.h: no prefill, so a
// 32k context takes seconds), then one plain decode step and one verify forward of
// `verify_width` rows are timed at that context (model/target_benchmark.h TargetStepTimer, the
// median of `repeats` calls each; every cache is filled first and the contexts are timed in turn,
// so all of them are held in memory at once): decode tok/s, the verify / decode ratio, and both
// relative to the shortest context measured, beside the bound from the bytes a step reads there.
// The machine's read bandwidth is sampled in turn with the steps: how fast the added K/V rows were
// drawn is only meaningful against what a plain read got at the same time.
// Prefill speed at a long prompt is the suite's figure (`--prompt-tokens 8192`).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/io/config.h"
#include "specula/kernels/kv_type.h"
#include "specula/kernels/matmul.h"
#include "specula/util/machine_load.h"

namespace specula::bench {

struct LongContextOptions {
  std::vector<int64_t> contexts = {512, 4096, 16384, 32768};
  int threads = 2;
  Precision precision = Precision::Fast;
  KvType kv_type = KvType::F32;
  int64_t repeats = 5;       // timed calls per figure (the median is reported)
  int64_t verify_width = 4;  // rows of the verify forward (gamma + 1)
  uint32_t seed = 1;
  std::string packed_cache_dir;
  uint64_t bandwidth_bytes = 256ull << 20;  // the read-bandwidth probe's buffer, well beyond the caches

  // One call per figure and a small probe buffer (smoke tests).
  static LongContextOptions quick();
  // Throws specula::Error naming the option and its value when one is out of range.
  void validate() const;
};

struct ContextFigure {
  int64_t context = 0;
  double fill_ms = 0.0;  // writing the synthetic rows
  double decode_ms = 0.0;
  double decode_tok_per_s = 0.0;
  double verify_ms = 0.0;
  double verify_ratio = 0.0;        // verify_ms / decode_ms
  double decode_vs_shortest = 0.0;  // decode tok/s / decode tok/s at the shortest context
  // The same ratio round by round: the median over the rounds of the shortest context's decode
  // step time over this context's in the same round, which the machine's drift within a run moves
  // less than the ratio of the two medians.
  double decode_vs_shortest_paired = 0.0;
  uint64_t kv_bytes = 0;  // KV allocated at this context
  // Bytes one decode step reads here: the weights as the kernels read them plus every attention
  // layer's K and V (kv_read_bytes_per_step).
  uint64_t step_read_bytes = 0;
  // The shortest context's step_read_bytes over this one's: what decode_vs_shortest would be if
  // the K/V rows streamed as fast as the weights.
  double bound_vs_shortest = 0.0;
  // The bytes this step reads beyond the shortest context's over its extra decode time: the rate
  // the attention drew its added K/V rows at, to hold against the read bandwidth (0 at the
  // shortest context, or where the step was not slower).
  double kv_read_gb_per_s = 0.0;
};

// K and V bytes one decode step's attention reads with `context` cached positions: every
// attention layer's, the KV-sharing layers included (each reads its donor's cache again), and on
// sliding layers the newest min(context, sliding_window) positions.
uint64_t kv_read_bytes_per_step(const TargetConfig& config, KvType type, int64_t context);

struct LongContextReport {
  LongContextOptions options;
  std::string model_dir;
  std::string cpu_model, kernels;
  std::vector<ContextFigure> figures;  // ascending context
  // One pass of the read-bandwidth probe after each round of timed steps: the best pass (the
  // suite's figure), their median and the slowest.
  double read_gb_per_s = 0.0, read_gb_per_s_median = 0.0, read_gb_per_s_min = 0.0;
  std::optional<MachineLoad> machine_load;
  double elapsed_s = 0.0;
};

LongContextReport bench_long_context(const std::string& model_dir, const LongContextOptions& options,
                                     const std::function<void(const std::string&)>& log);

nlohmann::json long_context_json(const LongContextReport& report);
std::string long_context_markdown(const LongContextReport& report);

}  // namespace specula::bench
