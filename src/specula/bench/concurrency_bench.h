#pragma once
// `specula bench --concurrency 1,2,4,8`: C generations started together through the
// continuous-batching scheduler (engine/scheduler.h, C slots), plain and speculative at a
// controlled acceptance (speculative/controlled_acceptance.h: the real drafter runs, its drafts are
// forced right with probability p). Per concurrency and mode: aggregate tok/s (every stream's
// tokens over the wall time from the common start to the last finish), decode aggregate tok/s
// (while every stream decodes), per-stream decode tok/s,
// time to first token p50 / p99 (from the common start), and the speculative runs' mean gamma and
// acceptance; ratios against one stream and against plain at the same concurrency, in one run.
// Each run measures one plain stream, then C plain streams, then C speculative streams back to
// back; the ratios against plain and plain's against one stream are the medians of the runs' own
// ratios (the machine's speed drifts).
// Plain mode also runs staggered clients (each sends requests back to back, their first requests
// spread over one request's length): the time to first token a server's users see.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/kernels/kv_type.h"
#include "specula/kernels/matmul.h"
#include "specula/model/drafter.h"
#include "specula/util/machine_load.h"

namespace specula::bench {

struct ConcurrencyOptions {
  std::vector<int> concurrency = {1, 2, 4, 8};
  int threads = 2;
  Precision precision = Precision::Fast;
  DrafterQuant draft_quant = DrafterQuant::Auto;
  DrafterHead draft_head = DrafterHead::Stored;
  KvType kv_type = KvType::F32;
  int64_t runs = 1;            // the median run (by aggregate tok/s) is reported
  int64_t prompt_tokens = 64;  // each stream's own prompt
  int64_t tokens = 32;         // generated per stream
  double acceptance = 0.7;     // the speculative runs' per-draft acceptance
  std::string gamma = "auto";
  int64_t step_rows = 0;  // the scheduler's row budget while streams decode (0 = its default)
  uint32_t seed = 1;
  std::string packed_cache_dir;

  static ConcurrencyOptions quick();
  void validate() const;
};

struct ConcurrencyFigure {
  int concurrency = 1;
  bool speculative = false;
  double aggregate_tok_per_s = 0.0;
  double per_stream_tok_per_s = 0.0;  // median over streams of each one's decode tok/s
  double ttft_p50_ms = 0.0;
  double ttft_p99_ms = 0.0;
  double wall_ms = 0.0;
  double mean_gamma = 0.0;  // drafts per round over every stream
  double acceptance_rate = 0.0;
  // aggregate / this mode's aggregate at concurrency 1 (plain: the median of each run's ratio to one
  // stream run just before it; speculative: of the reported runs, if concurrency 1 was measured)
  double vs_one_stream = 0.0;
  double vs_plain = 0.0;  // speculative: aggregate / plain's at the same concurrency (median of the runs' ratios)
  // Tokens per second while every stream decodes (from the last first token to the first last
  // token): the batching figure, without the prefills.
  double decode_aggregate_tok_per_s = 0.0;
  double decode_vs_one_stream = 0.0;
  double decode_vs_plain = 0.0;
  // Plain only: clients arriving one after another, as at a server (bench_concurrency): TTFT of
  // every request from its own submission, and p50 over the same figure for one client.
  double staggered_ttft_p50_ms = 0.0;
  double staggered_ttft_p99_ms = 0.0;
  double staggered_ttft_vs_one = 0.0;
};

struct ConcurrencyReport {
  ConcurrencyOptions options;
  std::string model_dir, drafter_dir;
  std::string cpu_model, kernels;
  double bandwidth_gbs = 0.0;
  std::vector<ConcurrencyFigure> figures;
  std::optional<MachineLoad> machine_load;
  double elapsed_s = 0.0;
};

ConcurrencyReport bench_concurrency(const std::string& model_dir, const std::string& drafter_dir,
                                    const ConcurrencyOptions& options,
                                    const std::function<void(const std::string&)>& log);

nlohmann::json concurrency_json(const ConcurrencyReport& report);
std::string concurrency_markdown(const ConcurrencyReport& report);

}  // namespace specula::bench
