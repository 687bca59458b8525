#include "specula/bench/long_context_bench.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "specula/bench/bench_report.h"
#include "specula/bench/synthetic_kv.h"
#include "specula/io/checkpoint_summary.h"
#include "specula/kernels/isa.h"
#include "specula/model/target_benchmark.h"
#include "specula/model/target_model.h"
#include "specula/util/cpu_info.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"
#include "specula/util/median.h"
#include "specula/util/memory_bandwidth.h"
#include "specula/util/progress.h"

namespace specula::bench {

namespace {

using Clock = std::chrono::steady_clock;

// GB/s of `bytes` read in `ms`; 0 where either is not positive.
double added_bytes_rate_gbs(uint64_t bytes, double ms) {
  return bytes > 0 && ms > 0 ? static_cast<double>(bytes) / ms / 1e6 : 0.0;
}

// The median over rounds of shortest[r] / longer[r] (times of the same round); 0 if none is valid.
double paired_ratio(const std::vector<double>& shortest, const std::vector<double>& longer) {
  std::vector<double> ratios;
  for (size_t r = 0; r < std::min(shortest.size(), longer.size()); ++r)
    if (shortest[r] > 0 && longer[r] > 0) ratios.push_back(shortest[r] / longer[r]);
  return ratios.empty() ? 0.0 : median(ratios);
}

}  // namespace

uint64_t kv_read_bytes_per_step(const TargetConfig& config, KvType type, int64_t context) {
  if (context <= 0) return 0;
  const int64_t window = config.text.sliding_window;
  uint64_t bytes = 0;
  for (const LayerGeometry& g : config.layers) {
    const int64_t positions = g.type == LayerType::Sliding && window > 0 ? std::min(context, window) : context;
    bytes += 2ull * static_cast<uint64_t>(g.num_kv_heads) * static_cast<uint64_t>(kv_head_row_bytes(type, g.head_dim)) *
             static_cast<uint64_t>(positions);
  }
  return bytes;
}

LongContextOptions LongContextOptions::quick() {
  LongContextOptions o;
  o.repeats = 1;
  o.bandwidth_bytes = 16ull << 20;
  return o;
}

void LongContextOptions::validate() const {
  if (contexts.empty()) fail("bench: no contexts given");
  for (int64_t c : contexts)
    if (c < 1) fail("bench: context {} must be >= 1", c);
  if (threads < 1 || threads > 1024) fail("bench: thread count {} must be in [1, 1024]", threads);
  if (repeats < 1) fail("bench: repeats {} must be >= 1", repeats);
  if (verify_width < 2) fail("bench: verify width {} must be >= 2", verify_width);
  if (bandwidth_bytes < (1ull << 20)) fail("bench: bandwidth buffer of {} bytes must be >= 1 MiB", bandwidth_bytes);
}

LongContextReport bench_long_context(const std::string& model_dir, const LongContextOptions& o,
                                     const std::function<void(const std::string&)>& log) {
  o.validate();
  const auto t_start = Clock::now();
  const MachineLoadMonitor load_monitor;
  LongContextReport report;
  report.options = o;
  std::sort(report.options.contexts.begin(), report.options.contexts.end());
  report.model_dir = model_dir;
  report.cpu_model = cpu_model_name();
  report.kernels = std::string(isa_name(active_isa()));
  if (const std::string fast = fast_kernels_summary(o.precision); !fast.empty()) report.kernels += " (" + fast + ")";

  TargetOptions to;
  to.load_threads = o.threads;
  to.precision = o.precision;
  to.kv_type = o.kv_type;
  to.packed_cache_dir = o.packed_cache_dir;
  to.rollback_reserve = std::max(to.rollback_reserve, o.verify_width);
  log(fmt::format("loading {} ...", model_dir));
  auto model = TargetModel::load(model_dir, to);
  const int64_t longest = report.options.contexts.back();
  // The timed forwards add verify_width + 1 positions (the untimed warm-up) past the context.
  if (longest + o.verify_width + 1 > model->max_context())
    fail("bench: context {} (+ {} positions of the timed steps) exceeds the model's {}", longest, o.verify_width + 1,
         model->max_context());
  ThreadPool pool(o.threads);
  const int32_t token = bench_prompt(model->vocab_size(), 2, o.seed).back();

  // Every context's cache is filled first, then the timers are sampled in turn (512, 4k, .., 512,
  // 4k, ..): the machine's drift over the run moves every context alike, as it does every width.
  std::vector<TargetCache> caches;
  caches.reserve(report.options.contexts.size());
  for (int64_t context : report.options.contexts) {
    ContextFigure f;
    f.context = context;
    caches.push_back(model->new_cache());
    const auto t_fill = Clock::now();
    fill_with_synthetic_rows(*model, caches.back(), context, o.seed);
    f.fill_ms = ms_since(t_fill);
    f.kv_bytes = caches.back().allocated_bytes();
    report.figures.push_back(f);
    log(fmt::format("context {}: filled in {:.0f} ms, KV {}", context, f.fill_ms, format_bytes(f.kv_bytes)));
  }
  std::vector<TargetStepTimer> timers;
  timers.reserve(caches.size());
  for (TargetCache& cache : caches) timers.emplace_back(*model, cache, token, o.verify_width, pool);
  ReadBandwidthProbe bandwidth(pool, o.bandwidth_bytes);
  bandwidth.sample_gbs();  // warm-up
  std::vector<double> read_gbs;
  for (int64_t i = 0; i < o.repeats; ++i) {
    for (TargetStepTimer& t : timers) t.sample();
    read_gbs.push_back(bandwidth.sample_gbs());
  }
  report.read_gb_per_s = *std::max_element(read_gbs.begin(), read_gbs.end());
  report.read_gb_per_s_median = median(read_gbs);
  report.read_gb_per_s_min = *std::min_element(read_gbs.begin(), read_gbs.end());
  for (size_t i = 0; i < timers.size(); ++i) {
    ContextFigure& f = report.figures[i];
    f.decode_vs_shortest_paired = paired_ratio(timers.front().decode_samples(), timers[i].decode_samples());
    const StepCosts c = timers[i].costs();
    f.decode_ms = c.decode_ms;
    f.decode_tok_per_s = c.decode_ms > 0 ? 1000.0 / c.decode_ms : 0.0;
    f.verify_ms = c.verify_ms.at(static_cast<size_t>(o.verify_width));
    f.verify_ratio = c.verify_ratio(o.verify_width);
    log(fmt::format("context {}: decode {:.2f} tok/s, verify({}) {:.2f}x", f.context, f.decode_tok_per_s,
                    o.verify_width, f.verify_ratio));
  }
  // What a step reads: the packed copies where the fast kernels have them, and the K/V rows.
  const uint64_t weight_bytes =
      model->weights().decode_bytes_per_token(summarize_checkpoint(model->checkpoint()), MatrixBytes::Packed);
  for (ContextFigure& f : report.figures)
    f.step_read_bytes = weight_bytes + kv_read_bytes_per_step(model->config(), o.kv_type, f.context);
  const ContextFigure& first = report.figures.front();
  for (ContextFigure& f : report.figures) {
    f.decode_vs_shortest = first.decode_tok_per_s > 0 ? f.decode_tok_per_s / first.decode_tok_per_s : 0.0;
    f.bound_vs_shortest = static_cast<double>(first.step_read_bytes) / static_cast<double>(f.step_read_bytes);
    f.kv_read_gb_per_s = added_bytes_rate_gbs(f.step_read_bytes - first.step_read_bytes, f.decode_ms - first.decode_ms);
  }
  report.machine_load = load_monitor.load();
  report.elapsed_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  return report;
}

nlohmann::json long_context_json(const LongContextReport& r) {
  nlohmann::json figures = nlohmann::json::array();
  for (const ContextFigure& f : r.figures)
    figures.push_back({{"context", f.context},
                       {"fill_ms", f.fill_ms},
                       {"decode_ms", f.decode_ms},
                       {"decode_tok_per_s", f.decode_tok_per_s},
                       {"decode_vs_shortest", f.decode_vs_shortest},
                       {"decode_vs_shortest_paired", f.decode_vs_shortest_paired},
                       {"verify_ms", f.verify_ms},
                       {"verify_ratio", f.verify_ratio},
                       {"kv_bytes", f.kv_bytes},
                       {"step_read_bytes", f.step_read_bytes},
                       {"bound_vs_shortest", f.bound_vs_shortest},
                       {"kv_read_gb_per_s", f.kv_read_gb_per_s}});
  return {{"model", r.model_dir},
          {"cpu_model", r.cpu_model},
          {"kernels", r.kernels},
          {"threads", r.options.threads},
          {"precision", precision_name(r.options.precision)},
          {"kv_type", kv_type_name(r.options.kv_type)},
          {"repeats", r.options.repeats},
          {"verify_width", r.options.verify_width},
          {"read_bandwidth_gb_per_s", r.read_gb_per_s},
          {"read_bandwidth_gb_per_s_median", r.read_gb_per_s_median},
          {"read_bandwidth_gb_per_s_min", r.read_gb_per_s_min},
          {"contexts", figures},
          {"machine_load", machine_load_json(r.machine_load)},
          {"elapsed_s", r.elapsed_s}};
}

std::string long_context_markdown(const LongContextReport& r) {
  const int64_t w = r.options.verify_width;
  std::string out = fmt::format(
      "# specula bench --contexts\n\nCPU {} | kernels {} | read bandwidth {:.1f} GB/s (median {:.1f}, slowest "
      "{:.1f}) | {} threads | {} precision | KV cache {}\nmodel {}\n"
      "Caches filled with synthetic rows at each context; one decode step and one verify forward of {} rows timed "
      "there (median of {} calls each, the contexts taken in turn, one pass of a plain read after each round: the "
      "read bandwidth is the best pass). Bound: the shortest context's bytes read per decode step (weights, and "
      "every attention layer's K and V) over this context's, the decode ratio if every byte streamed at one rate. "
      "Paired: the decode ratio taken round by round (the median of each round's shortest-context step time over "
      "this context's). K/V GB/s: the bytes a step reads beyond the shortest context's over its extra decode "
      "time, the rate the attention drew its added rows at.\n\n"
      "| context | decode tok/s | x shortest context | paired | bound | MB read / step | K/V GB/s | decode ms | "
      "verify({}) ms | verify({}) / decode | KV MB |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n",
      r.cpu_model, r.kernels, r.read_gb_per_s, r.read_gb_per_s_median, r.read_gb_per_s_min, r.options.threads,
      precision_name(r.options.precision), kv_type_name(r.options.kv_type), r.model_dir, w, r.options.repeats, w, w);
  for (const ContextFigure& f : r.figures)
    out += fmt::format("| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {} | {:.2f} | {:.2f} | {:.2f} | {:.1f} |\n",
                       f.context, f.decode_tok_per_s, f.decode_vs_shortest, f.decode_vs_shortest_paired,
                       f.bound_vs_shortest, static_cast<double>(f.step_read_bytes) / 1e6,
                       f.kv_read_gb_per_s > 0 ? fmt::format("{:.1f}", f.kv_read_gb_per_s) : std::string("-"),
                       f.decode_ms, f.verify_ms, f.verify_ratio, static_cast<double>(f.kv_bytes) / (1024.0 * 1024.0));
  out += "\n" + machine_load_line(r.machine_load);
  out += fmt::format("\n{:.0f} s\n", r.elapsed_s);
  return out;
}

}  // namespace specula::bench
