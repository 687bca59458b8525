// `specula bench`: end-to-end target-model speed on synthetic full-size checkpoints (default: E2B
// and E4B geometry, 4-bit group 64, MLX layout) or given checkpoint directories. Measures load
// time, prefill tok/s, decode tok/s per thread count, peak RSS, the weight bytes one decode step
// streams and the implied GB/s next to the machine's measured read bandwidth. Writes JSON and a
// markdown table.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bench_draft.h"
#include "cli/commands.h"
#include "specula/kernels/isa.h"
#include "specula/model/target_benchmark.h"
#include "specula/model/target_model.h"
#include "specula/synth/plan.h"
#include "specula/synth/writer.h"
#include "specula/util/error.h"
#include "specula/util/memory_bandwidth.h"

namespace specula::cli {

namespace {

namespace fs = std::filesystem;

struct BenchArgs {
  std::vector<std::string> models;
  std::vector<std::string> presets;
  int bits = 4;
  int group_size = 64;
  std::string work_dir = (fs::temp_directory_path() / "specula-bench").string();
  std::vector<int> threads = {1, 2};
  int64_t prompt_tokens = 512;
  int64_t decode_tokens = 16;
  std::string json_path;
  std::string markdown_path;
  DraftBenchArgs draft;  // --draft: speculative-decoding costs instead of plain speed
};

// The checkpoint directory of a preset, synthesized once and reused while its config exists.
std::string ensure_synthetic(const BenchArgs& a, const std::string& preset) {
  const fs::path dir = fs::path(a.work_dir) / fmt::format("{}-q{}g{}", preset, a.bits, a.group_size);
  if (fs::exists(dir / "config.json")) return dir.string();
  synth::SynthOptions o;
  o.preset = preset;
  o.quant = QuantSpec{a.bits, a.group_size, "affine"};
  synth::validate_options(o);
  synth::WriteCheckpointOptions w;
  w.progress = true;
  w.progress_label = "synth " + preset;
  std::fprintf(stderr, "writing synthetic %s checkpoint to %s\n", preset.c_str(), dir.string().c_str());
  synth::write_checkpoint(synth::plan_target(o), dir.string(), w);
  return dir.string();
}

void run_bench(const BenchArgs& a) {
  std::vector<std::pair<std::string, std::string>> targets;  // name, dir
  for (const std::string& m : a.models) targets.emplace_back(fs::path(m).filename().string(), m);
  if (!a.draft.draft_dir.empty()) {
    if (a.models.size() != 1 || !a.presets.empty()) fail("bench --draft needs exactly one --model (the drafter's target)");
    const std::string md = run_draft_bench(a.models.front(), a.draft, a.threads);
    if (!a.markdown_path.empty()) {
      std::ofstream f(a.markdown_path);
      if (!(f << md)) fail("bench: cannot write {}", a.markdown_path);
    }
    return;
  }
  std::vector<std::string> presets = a.presets;
  if (presets.empty() && a.models.empty()) presets = {"e2b", "e4b"};
  for (const std::string& p : presets) targets.emplace_back(fmt::format("{} q{}g{}", p, a.bits, a.group_size),
                                                            ensure_synthetic(a, p));

  nlohmann::json report = {{"prompt_tokens", a.prompt_tokens},
                           {"decode_tokens", a.decode_tokens},
                           {"models", nlohmann::json::array()}};
  struct Row {
    std::string name;
    int threads;
    double load_ms, prefill_tok_per_s, decode_tok_per_s, decode_ms, decode_cpu_ms, weight_mb, gbs, rss_mb;
  };
  std::vector<Row> rows;

  for (const auto& [name, dir] : targets) {
    TargetOptions opts;
    const auto t0 = std::chrono::steady_clock::now();
    auto model = TargetModel::load(dir, opts);
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t bytes = decode_weight_bytes(*model);
    nlohmann::json m = {{"name", name}, {"dir", dir}, {"load_ms", load_ms}, {"weight_bytes_per_token", bytes},
                        {"runs", nlohmann::json::array()}};
    for (int t : a.threads) {
      ThreadPool pool(t);
      TargetBenchOptions bo;
      bo.prompt_tokens = a.prompt_tokens;
      bo.decode_tokens = a.decode_tokens;
      const TargetBenchRun r = bench_target(*model, bo, pool);
      const double gbs = static_cast<double>(bytes) * r.decode_tok_per_s / 1e9;
      const double rss_mb = static_cast<double>(peak_rss_bytes()) / 1e6;
      m["runs"].push_back({{"threads", r.threads},
                           {"prefill_ms", r.prefill_ms},
                           {"prefill_tok_per_s", r.prefill_tok_per_s},
                           {"decode_ms_median", r.decode_ms_median},
                           {"decode_ms_min", r.decode_ms_min},
                           {"decode_tok_per_s", r.decode_tok_per_s},
                           {"prefill_cpu_ms", r.prefill_cpu_ms},
                           {"decode_cpu_ms_per_token", r.decode_cpu_ms_per_token},
                           {"implied_gbs", gbs},
                           {"peak_rss_mb", rss_mb}});
      rows.push_back(Row{name, r.threads, load_ms, r.prefill_tok_per_s, r.decode_tok_per_s, r.decode_ms_median,
                         r.decode_cpu_ms_per_token, static_cast<double>(bytes) / 1e6, gbs, rss_mb});
      std::fprintf(stderr, "%s, %d threads: prefill %.2f tok/s, decode %.2f tok/s\n", name.c_str(), r.threads,
                   r.prefill_tok_per_s, r.decode_tok_per_s);
    }
    m["peak_rss_mb"] = static_cast<double>(peak_rss_bytes()) / 1e6;
    report["models"].push_back(std::move(m));
  }
  // Bandwidth last, so its buffer does not count in the models' peak RSS.
  int max_threads = 1;
  for (int t : a.threads) max_threads = std::max(max_threads, t);
  double bandwidth = 0.0;
  {
    ThreadPool pool(max_threads);
    bandwidth = measure_read_bandwidth_gbs(pool);
  }
  report["machine"] = {{"read_bandwidth_gbs", bandwidth},
                       {"bandwidth_threads", max_threads},
                       {"hardware_threads", std::thread::hardware_concurrency()},
                       {"kernels", std::string(isa_name(active_isa()))}};
  std::string md = fmt::format(
      "Machine read bandwidth: {:.1f} GB/s ({} threads), kernels: {}\n\n"
      "| model | threads | load ms | prefill tok/s ({} tok) | decode tok/s | decode ms (median) | decode CPU ms/token | "
      "weight MB/token | implied GB/s | % of bandwidth | peak RSS MB |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n",
      bandwidth, max_threads, isa_name(active_isa()), a.prompt_tokens);
  for (const Row& r : rows)
    md += fmt::format("| {} | {} | {:.0f} | {:.2f} | {:.2f} | {:.1f} | {:.1f} | {:.0f} | {:.2f} | {:.0f}% | {:.0f} |\n",
                      r.name, r.threads, r.load_ms, r.prefill_tok_per_s, r.decode_tok_per_s, r.decode_ms, r.decode_cpu_ms,
                      r.weight_mb, r.gbs,
                      bandwidth > 0 ? 100.0 * r.gbs / bandwidth : 0.0, r.rss_mb);
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    if (!(f << report.dump(2) << "\n")) fail("bench: cannot write {}", a.json_path);
  }
  if (!a.markdown_path.empty()) {
    std::ofstream f(a.markdown_path);
    if (!(f << md)) fail("bench: cannot write {}", a.markdown_path);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "measure load time, prefill and decode speed (default: synthetic E2B and E4B, 4-bit g64)");
  cmd->add_option("--model", args->models, "checkpoint directory to measure (repeatable)");
  cmd->add_option("--preset", args->presets, "synthetic preset to write (once) and measure (repeatable)");
  cmd->add_option("--bits", args->bits, "quantization bits of synthetic checkpoints")->check(CLI::IsMember({2, 3, 4, 5, 6, 8}));
  cmd->add_option("--group-size", args->group_size, "quantization group size of synthetic checkpoints")
      ->check(CLI::IsMember({32, 64, 128}));
  cmd->add_option("--work-dir", args->work_dir, "where synthetic checkpoints are written and reused");
  cmd->add_option("--threads", args->threads, "thread counts to measure, e.g. 1,2")->delimiter(',')
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--prompt-tokens", args->prompt_tokens, "prefill prompt length")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--decode-tokens", args->decode_tokens, "decode steps measured (median reported)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--json", args->json_path, "write the results as JSON to this file");
  cmd->add_option("--markdown", args->markdown_path, "write the markdown table to this file");
  cmd->add_option("--draft", args->draft.draft_dir,
                  "assistant drafter directory: measure drafter-step and verify costs and controlled-acceptance speedups");
  cmd->add_flag("--costs-only", args->draft.costs_only, "with --draft: skip the controlled-acceptance runs");
  cmd->add_option("--generate-tokens", args->draft.generate_tokens, "with --draft: tokens per controlled-acceptance run")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--draft-context", args->draft.prompt_tokens, "with --draft: context length for the cost measurements")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace specula::cli
