// `specula bench`: the benchmark suite (bench/bench_suite.h) on a given checkpoint (and
// drafter), or, without --model, on synthetic full-size E2B and E4B checkpoints (4-bit group 64,
// the E4B with its bf16 assistant drafter) written once into a cache directory. Markdown tables on
// stdout, or one JSON object with --json; progress lines on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/kv_type_option.h"
#include "cli/model_path.h"
#include "specula/bench/bench_report.h"
#include "specula/bench/bench_suite.h"
#include "specula/bench/concurrency_bench.h"
#include "specula/bench/long_context_bench.h"
#include "specula/bench/synthetic_models.h"
#include "specula/kernels/isa.h"
#include "specula/kernels/matmul.h"
#include "specula/model/drafter.h"
#include "specula/model/packed_cache.h"
#include "specula/util/cpu_info.h"
#include "specula/util/error.h"
#include "specula/util/machine_load.h"

namespace specula::cli {

namespace {

namespace fs = std::filesystem;

struct BenchArgs {
  std::string model;
  std::string draft;
  std::vector<std::string> presets;
  std::string cache_dir;
  std::vector<int> threads = {1, 2};
  bool json = false;
  std::string precision = "fast";
  std::string draft_quant = "auto";
  std::string draft_head = "stored";
  std::string kv_type = "f32";
  bool quick = false;
  int64_t runs = 0;  // 0: the default of the chosen mode (full or quick)
  int64_t prompt_tokens = 0;
  int64_t decode_tokens = 0;
  int64_t spec_tokens = 0;
  std::vector<int> concurrency;   // --concurrency: the batching benchmark instead of the suite
  std::vector<int64_t> contexts;  // --contexts: the long-context benchmark instead of the suite
  double acceptance = 0.7;
  std::string gamma = "auto";
  int64_t step_rows = 0;
};

void log_line(const std::string& s) {
  std::fprintf(stderr, "[bench] %s\n", s.c_str());
  std::fflush(stderr);
}

// A readable name for a checkpoint directory: its last component, or "parent/model" for the
// common ".../NAME/model" layout.
std::string model_name(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const std::string last = p.filename().string();
  if ((last == "model" || last == "target") && !p.parent_path().filename().empty())
    return p.parent_path().filename().string() + "/" + last;
  return last;
}

// The models to measure: --model/--draft, else the synthetic checkpoints of --preset.
std::vector<bench::ModelToBench> models_to_bench(const BenchArgs& a, const std::vector<std::string>& default_presets) {
  std::vector<bench::ModelToBench> models;
  if (!a.model.empty()) {
    models.push_back({model_name(a.model), a.model, a.draft});
    return models;
  }
  const std::string cache = a.cache_dir.empty() ? bench::default_bench_cache_dir() : a.cache_dir;
  const std::vector<std::string> presets = a.presets.empty() ? default_presets : a.presets;
  for (const std::string& p : presets) {
    bench::SyntheticModelSpec spec;
    spec.preset = p;
    spec.with_drafter = p == "e4b";  // the E4B-assistant is the drafter the benchmarks name
    const bench::SyntheticModel sm = bench::ensure_synthetic_model(cache, spec, log_line);
    models.push_back({spec.name(), sm.model_dir, sm.drafter_dir});
  }
  return models;
}

// --concurrency: streams started together through the batching scheduler (bench/concurrency_bench.h).
void run_concurrency_bench(const BenchArgs& a) {
  if (!a.draft.empty() && a.model.empty())
    throw CLI::ValidationError("--draft", "needs --model (the drafter's target checkpoint)");
  bench::ConcurrencyOptions o = a.quick ? bench::ConcurrencyOptions::quick() : bench::ConcurrencyOptions{};
  o.concurrency = a.concurrency;
  o.threads = *std::max_element(a.threads.begin(), a.threads.end());
  o.precision = parse_precision(a.precision);
  o.draft_quant = parse_drafter_quant(a.draft_quant);
  o.draft_head = parse_drafter_head(a.draft_head);
  o.kv_type = parse_kv_type(a.kv_type);
  o.packed_cache_dir = default_packed_cache_dir();
  if (a.runs > 0) o.runs = a.runs;
  if (a.prompt_tokens > 0) o.prompt_tokens = a.prompt_tokens;
  if (a.spec_tokens > 0) o.tokens = a.spec_tokens;
  o.acceptance = a.acceptance;
  o.gamma = a.gamma;
  o.step_rows = a.step_rows;
  o.validate();
  for (const bench::ModelToBench& m : models_to_bench(a, {"e4b"})) {
    const bench::ConcurrencyReport r = bench::bench_concurrency(m.model_dir, m.drafter_dir, o, log_line);
    const std::string out = a.json ? bench::concurrency_json(r).dump(2) + "\n" : bench::concurrency_markdown(r);
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
}

// --contexts: decode and verify cost as the context grows (bench/long_context_bench.h).
void run_long_context_bench(const BenchArgs& a) {
  if (!a.draft.empty())
    throw CLI::ValidationError("--draft", "is not used with --contexts (the target alone is timed)");
  bench::LongContextOptions o = a.quick ? bench::LongContextOptions::quick() : bench::LongContextOptions{};
  o.contexts = a.contexts;
  o.threads = *std::max_element(a.threads.begin(), a.threads.end());
  o.precision = parse_precision(a.precision);
  o.kv_type = parse_kv_type(a.kv_type);
  o.packed_cache_dir = default_packed_cache_dir();
  if (a.runs > 0) o.repeats = a.runs;
  o.validate();
  for (const bench::ModelToBench& m : models_to_bench(a, {"e4b"})) {
    const bench::LongContextReport r = bench::bench_long_context(m.model_dir, o, log_line);
    const std::string out = a.json ? bench::long_context_json(r).dump(2) + "\n" : bench::long_context_markdown(r);
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
}

void run_bench(const BenchArgs& a) {
  if (!a.draft.empty() && a.model.empty())
    throw CLI::ValidationError("--draft", "needs --model (the drafter's target checkpoint)");
  if (!a.presets.empty() && !a.model.empty())
    throw CLI::ValidationError("--preset", "selects synthetic checkpoints and cannot be combined with --model");
  const auto start = std::chrono::steady_clock::now();
  const MachineLoadMonitor load_monitor;

  bench::SuiteOptions o = a.quick ? bench::SuiteOptions::quick() : bench::SuiteOptions{};
  o.threads.clear();
  for (int t : a.threads)  // each count once, in the order given
    if (std::find(o.threads.begin(), o.threads.end(), t) == o.threads.end()) o.threads.push_back(t);
  o.precision = parse_precision(a.precision);
  o.draft_quant = parse_drafter_quant(a.draft_quant);
  o.draft_head = parse_drafter_head(a.draft_head);
  o.kv_type = parse_kv_type(a.kv_type);
  o.packed_cache_dir = default_packed_cache_dir();
  if (a.runs > 0) o.runs = a.runs;
  if (a.prompt_tokens > 0) o.prompt_tokens = a.prompt_tokens;
  if (a.decode_tokens > 0) o.decode_tokens = a.decode_tokens;
  if (a.spec_tokens > 0) o.spec_tokens = a.spec_tokens;
  o.validate();

  const std::vector<bench::ModelToBench> models = models_to_bench(a, {"e2b", "e4b"});
  log_line(fmt::format(
      "precision {}, threads {}, {} run(s); prompt {} + {} decode tokens; verify widths 2..{}; "
      "speculative runs {} + {} tokens at p {} x gamma {}",
      precision_name(o.precision), fmt::join(o.threads, ","), o.runs, o.prompt_tokens, o.decode_tokens,
      o.max_verify_width, o.spec_prompt_tokens, o.spec_tokens, fmt::join(o.acceptance, ","), fmt::join(o.gammas, ",")));

  bench::SuiteReport report;
  report.options = o;
  report.cpu_model = cpu_model_name();
  report.kernels = std::string(isa_name(active_isa()));
  if (const std::string fast = fast_kernels_summary(o.precision); !fast.empty()) report.kernels += " (" + fast + ")";
  report.hardware_threads = static_cast<int>(std::thread::hardware_concurrency());
  for (const bench::ModelToBench& m : models) report.models.push_back(bench::bench_model(m, o, log_line));
  // Last, so that its buffer does not count in the models' peak RSS.
  report.bandwidth_gbs = bench::measure_bandwidths(o, log_line);
  report.machine_load = load_monitor.load();
  report.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::string out = a.json ? bench::report_json(report).dump(2) + "\n" : bench::report_markdown(report);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  log_line(fmt::format("done in {:.0f} s", report.elapsed_s));
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "benchmark suite: decode, prefill, time to first token, verify and drafter costs, speculative speedups at "
      "controlled acceptance, load time, peak RSS, read bandwidth (default: synthetic E2B and E4B 4-bit g64 + "
      "E4B-assistant, written once into the cache directory)");
  cmd->add_option("--model", args->model, "target checkpoint directory (default: synthetic checkpoints)")
      ->transform(model_path());
  cmd->add_option("--draft", args->draft,
                  "assistant drafter directory or .gguf file: adds drafter costs and speculative runs")
      ->transform(model_path());
  cmd->add_option("--preset", args->presets, "without --model: synthetic models to measure (default e2b and e4b)")
      ->check(CLI::IsMember({"e2b", "e4b"}));
  cmd->add_option("--cache-dir", args->cache_dir,
                  "where synthetic checkpoints are written and reused (default $XDG_CACHE_HOME/specula/bench or "
                  "~/.cache/specula/bench)");
  cmd->add_option("--threads", args->threads, "thread counts, e.g. 1,2")
      ->delimiter(',')
      ->check(in_range(limits::IntRange{1, limits::kThreads.hi}))
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print one JSON object instead of the markdown tables");
  cmd->add_option("--precision", args->precision,
                  "matmul precision: exact (f32), fast (low-precision activations) or int8 (int8 activations for "
                  "the quantized matrices but the attention's q/k/v projections)")
      ->check(CLI::IsMember({"exact", "fast", "int8"}))
      ->capture_default_str();
  cmd->add_option("--draft-quant", args->draft_quant,
                  "drafter weights: auto (4-bit copies of a dense-head drafter's 16-bit matrices in fast and int8 "
                  "precision), none (as stored), q4 or q8 (affine copies made at load)")
      ->check(CLI::IsMember({"auto", "none", "q4", "q8"}))
      ->capture_default_str();
  cmd->add_option("--draft-head", args->draft_head,
                  "drafter head of a dense-head drafter: stored (every vocabulary row each step) or clusters "
                  "(2048 clusters built at load; a step scores the tokens of the best 32)")
      ->check(CLI::IsMember({"stored", "clusters"}))
      ->capture_default_str();
  add_kv_type_option(cmd, args->kv_type);
  cmd->add_option("--runs", args->runs,
                  "runs per figure, the median is reported (default 3; --quick 1; --concurrency: default 1, each run "
                  "measures one plain stream, then N plain and N speculative streams back to back)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--prompt-tokens", args->prompt_tokens, "prefill prompt length (default 512; --quick 32)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--decode-tokens", args->decode_tokens, "decode steps timed after the prompt (default 16; --quick 4)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--spec-tokens", args->spec_tokens,
                  "tokens per speculative and matching plain run (default 32; --quick 8)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_flag("--quick", args->quick, "a few tokens and one run (smoke tests; the figures are not meaningful)");
  cmd->add_option("--concurrency", args->concurrency,
                  "instead of the suite: N streams at once through the batching scheduler, plain and speculative, "
                  "for each N, e.g. 1,2,4,8 (aggregate and per-stream tok/s, TTFT p50/p99; default model: synthetic "
                  "E4B + assistant; tokens per stream: --spec-tokens, default 32; prompt: --prompt-tokens, default 64)")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  cmd->add_option("--contexts", args->contexts,
                  "instead of the suite: decode tok/s and the 4-row verify / decode ratio at each context, e.g. "
                  "512,4096,16384,32768, with the caches filled by synthetic rows (no prefill; default model: "
                  "synthetic E4B; --runs: timed calls per figure, default 5, --quick 1)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->excludes("--concurrency");
  cmd->add_option("--acceptance", args->acceptance, "with --concurrency: the speculative streams' acceptance p")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--gamma", args->gamma, "with --concurrency: the speculative streams' gamma (N or auto)")
      ->check(gamma_value())
      ->capture_default_str();
  cmd->add_option("--step-rows", args->step_rows,
                  "with --concurrency: the scheduler's row budget of a step while streams decode (0 = 32)")
      ->check(in_range(limits::kStepRows));
  cmd->callback([args] {
    if (!args->concurrency.empty()) return run_concurrency_bench(*args);
    if (!args->contexts.empty()) return run_long_context_bench(*args);
    run_bench(*args);
  });
}

}  // namespace specula::cli
