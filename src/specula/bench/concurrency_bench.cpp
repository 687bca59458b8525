#include "specula/bench/concurrency_bench.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "specula/bench/bench_report.h"
#include "specula/engine/scheduler.h"
#include "specula/kernels/isa.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/controlled_acceptance.h"
#include "specula/util/cpu_info.h"
#include "specula/util/error.h"
#include "specula/util/median.h"
#include "specula/util/memory_bandwidth.h"

namespace specula::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Requests each staggered client sends back to back.
constexpr int64_t kStaggeredRequests = 3;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The value below which a fraction q of the sorted samples lie (nearest rank).
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// BOS, then pseudo-random ids past the special tokens (the first 1000 ids on real vocabularies).
std::vector<int32_t> stream_prompt(int64_t length, uint32_t seed, int64_t vocab) {
  const int64_t first = vocab > 2000 ? 1000 : 3;
  std::vector<int32_t> t{2};
  uint32_t s = seed * 2654435761u + 12345u;
  while (static_cast<int64_t>(t.size()) < length) {
    s = s * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>(first + (s >> 8) % static_cast<uint32_t>(vocab - first)));
  }
  return t;
}

struct StreamResult {
  double ttft_ms = 0.0;  // from the common start
  double end_ms = 0.0;
  std::vector<double> token_ms;  // when each token was emitted, from the common start
  SpeculativeResult result;
};

// Runs one generation per entry of `generations` at once through `scheduler`.
std::vector<StreamResult> run_together(Scheduler& scheduler, std::vector<ScheduledGeneration> generations) {
  std::vector<StreamResult> out(generations.size());
  std::vector<std::thread> threads;
  std::mutex m;
  std::string error;
  const auto start = Clock::now();
  for (size_t i = 0; i < generations.size(); ++i) {
    threads.emplace_back([&, i] {
      ScheduledGeneration g = std::move(generations[i]);
      g.options.on_emit = [&, i](int32_t, std::span<const float>) {
        out[i].token_ms.push_back(ms_between(start, Clock::now()));
        if (out[i].token_ms.size() == 1) out[i].ttft_ms = out[i].token_ms[0];
        return true;
      };
      try {
        out[i].result = scheduler.run(std::move(g));
      } catch (const std::exception& e) {
        std::lock_guard lock(m);
        error = e.what();
      }
      out[i].end_ms = ms_between(start, Clock::now());
    });
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) fail("bench: a concurrent generation failed: {}", error);
  return out;
}

// Clients arriving one after another, as at a server: client i submits its first request at
// i * spacing_ms, then each next one as soon as its previous one has ended (a closed loop),
// `requests` each. Returns every request's time to first token, from its own submission.
std::vector<double> staggered_ttfts(Scheduler& scheduler, int clients, int64_t requests, double spacing_ms,
                                    const std::function<ScheduledGeneration(int, int64_t)>& generation) {
  std::vector<double> ttft;
  std::vector<std::thread> threads;
  std::mutex m;
  std::string error;
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::this_thread::sleep_until(start + std::chrono::duration<double, std::milli>(spacing_ms * c));
      for (int64_t r = 0; r < requests; ++r) {
        ScheduledGeneration g = generation(c, r);
        const auto submitted = Clock::now();
        double first = -1.0;
        g.options.on_emit = [&](int32_t, std::span<const float>) {
          if (first < 0) first = ms_between(submitted, Clock::now());
          return true;
        };
        try {
          scheduler.run(std::move(g));
        } catch (const std::exception& e) {
          std::lock_guard lock(m);
          error = e.what();
          return;
        }
        std::lock_guard lock(m);
        ttft.push_back(first);
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) fail("bench: a staggered client's generation failed: {}", error);
  return ttft;
}

ConcurrencyFigure summarize(int c, bool speculative, const std::vector<StreamResult>& streams) {
  ConcurrencyFigure f;
  f.concurrency = c;
  f.speculative = speculative;
  std::vector<double> ttft, per_stream;
  int64_t tokens = 0, drafted = 0, accepted = 0, rounds = 0;
  for (const StreamResult& s : streams) {
    ttft.push_back(s.ttft_ms);
    per_stream.push_back(s.result.stats.decode_tok_per_s());
    f.wall_ms = std::max(f.wall_ms, s.end_ms);
    tokens += static_cast<int64_t>(s.result.tokens.size());
    drafted += s.result.stats.drafted;
    accepted += s.result.stats.accepted;
    rounds += s.result.stats.rounds;
  }
  f.aggregate_tok_per_s = f.wall_ms > 0 ? static_cast<double>(tokens) * 1000.0 / f.wall_ms : 0.0;
  // While every stream decodes: from the last first token to the first last token.
  double from = 0.0, to = f.wall_ms;
  for (const StreamResult& s : streams) {
    if (s.token_ms.empty()) continue;
    from = std::max(from, s.token_ms.front());
    to = std::min(to, s.token_ms.back());
  }
  int64_t together = 0;
  for (const StreamResult& s : streams)
    for (double t : s.token_ms) together += t > from && t <= to;
  f.decode_aggregate_tok_per_s = to > from ? static_cast<double>(together) * 1000.0 / (to - from) : 0.0;
  f.per_stream_tok_per_s = median(per_stream);
  f.ttft_p50_ms = percentile(ttft, 0.5);
  f.ttft_p99_ms = percentile(ttft, 0.99);
  f.mean_gamma = rounds > 0 ? static_cast<double>(drafted) / static_cast<double>(rounds) : 0.0;
  f.acceptance_rate = drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  return f;
}

}  // namespace

ConcurrencyOptions ConcurrencyOptions::quick() {
  ConcurrencyOptions o;
  o.concurrency = {1, 2};
  o.prompt_tokens = 8;
  o.tokens = 6;
  return o;
}

void ConcurrencyOptions::validate() const {
  if (concurrency.empty()) fail("bench: no concurrency levels given");
  for (int c : concurrency)
    if (c < 1 || c > 256) fail("bench: concurrency {} must be in [1, 256]", c);
  if (threads < 1 || threads > 1024) fail("bench: thread count {} must be in [1, 1024]", threads);
  if (runs < 1) fail("bench: runs {} must be >= 1", runs);
  if (prompt_tokens < 1) fail("bench: prompt tokens {} must be >= 1", prompt_tokens);
  if (tokens < 1) fail("bench: tokens {} must be >= 1", tokens);
  if (!(acceptance >= 0.0 && acceptance <= 1.0)) fail("bench: acceptance {} must be in [0, 1]", acceptance);
  if (step_rows < 0) fail("bench: step rows {} must be >= 0", step_rows);
  parse_gamma_choice(gamma);
}

ConcurrencyReport bench_concurrency(const std::string& model_dir, const std::string& drafter_dir,
                                    const ConcurrencyOptions& o, const std::function<void(const std::string&)>& log) {
  o.validate();
  const auto t_start = Clock::now();
  const MachineLoadMonitor load_monitor;
  ConcurrencyReport report;
  report.options = o;
  report.model_dir = model_dir;
  report.drafter_dir = drafter_dir;
  report.cpu_model = cpu_model_name();
  report.kernels = std::string(isa_name(active_isa()));
  if (const std::string fast = fast_kernels_summary(o.precision); !fast.empty()) report.kernels += " (" + fast + ")";

  GammaChoice gamma = parse_gamma_choice(o.gamma);
  const int64_t max_gamma = gamma.automatic ? gamma.max_gamma : gamma.fixed;
  TargetOptions to;
  to.load_threads = o.threads;
  to.precision = o.precision;
  to.kv_type = o.kv_type;
  to.packed_cache_dir = o.packed_cache_dir;
  to.rollback_reserve = std::max(to.rollback_reserve, max_gamma);
  log(fmt::format("loading {} ...", model_dir));
  auto model = TargetModel::load(model_dir, to);
  std::unique_ptr<Drafter> drafter;
  if (!drafter_dir.empty())
    drafter = Drafter::load(drafter_dir, *model, DrafterConvention::Ollama, o.draft_quant, o.draft_head);
  ThreadPool pool(o.threads);
  const int most = *std::max_element(o.concurrency.begin(), o.concurrency.end());

  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < most; ++i)
    prompts.push_back(stream_prompt(o.prompt_tokens, o.seed + static_cast<uint32_t>(i), model->vocab_size()));
  auto plain_generation = [&](int i, int64_t tokens) {
    ScheduledGeneration g;
    g.prompt = prompts[static_cast<size_t>(i)];
    g.options.max_tokens = tokens;
    g.options.ignore_eos = true;
    g.options.method = DraftMethod::Lookup;
    g.options.gamma.fixed = 0;
    return g;
  };

  // Each stream's plain continuation, long enough for the forced drafts of its last round (and a
  // warm-up of every slot).
  std::vector<std::vector<int32_t>> reference(static_cast<size_t>(most));
  {
    SchedulerOptions so{most, o.step_rows, false};
    Scheduler scheduler(*model, pool, so);
    std::vector<ScheduledGeneration> gens;
    for (int i = 0; i < most; ++i) gens.push_back(plain_generation(i, o.tokens + max_gamma + 1));
    const auto t0 = Clock::now();
    const std::vector<StreamResult> r = run_together(scheduler, std::move(gens));
    for (int i = 0; i < most; ++i) reference[static_cast<size_t>(i)] = r[static_cast<size_t>(i)].result.tokens;
    log(fmt::format("reference continuations of {} streams: {:.1f} s", most, ms_between(t0, Clock::now()) / 1000));
  }

  // One request alone: a request's length, which the staggered clients' arrivals divide evenly.
  double solo_ms = 0.0;
  {
    Scheduler scheduler(*model, pool, SchedulerOptions{1, o.step_rows, false});
    const auto t0 = Clock::now();
    scheduler.run(plain_generation(0, o.tokens));
    solo_ms = ms_between(t0, Clock::now());
  }
  auto staggered_generation = [&](int client, int64_t request) {
    ScheduledGeneration g = plain_generation(0, o.tokens);
    const auto id = static_cast<uint32_t>(1000 + client * kStaggeredRequests + request);
    g.prompt = stream_prompt(o.prompt_tokens, o.seed + id, model->vocab_size());
    return g;
  };

  // N streams at once, plain or speculative; every stream's tokens checked against its reference.
  auto run_streams = [&](int c, bool speculative) {
    SchedulerOptions so{c, o.step_rows, false};
    Scheduler scheduler(*model, pool, so);
    std::vector<ScheduledGeneration> gens;
    for (int i = 0; i < c; ++i) {
      ScheduledGeneration g = plain_generation(i, o.tokens);
      if (speculative) {
        g.drafter = drafter.get();
        g.options.method = DraftMethod::Drafter;
        g.options.gamma = gamma;
        g.options.override_drafts = controlled_acceptance(reference[static_cast<size_t>(i)], o.acceptance,
                                                          model->vocab_size(), o.seed + static_cast<uint64_t>(i));
      }
      gens.push_back(std::move(g));
    }
    const std::vector<StreamResult> r = run_together(scheduler, std::move(gens));
    for (int i = 0; i < c; ++i) {
      const auto& want = reference[static_cast<size_t>(i)];
      const auto& got = r[static_cast<size_t>(i)].result.tokens;
      if (!std::equal(got.begin(), got.end(), want.begin()))
        fail("bench: stream {} of {} ({}) differs from its plain continuation", i, c,
             speculative ? "speculative" : "plain");
    }
    ConcurrencyFigure f = summarize(c, speculative, r);
    log(fmt::format(
        "concurrency {} {}: {:.2f} tok/s aggregate ({:.2f} while all decode), {:.2f} per stream, "
        "TTFT p50 {:.0f} ms{}",
        c, speculative ? "speculative" : "plain", f.aggregate_tok_per_s, f.decode_aggregate_tok_per_s,
        f.per_stream_tok_per_s, f.ttft_p50_ms, speculative ? fmt::format(", mean gamma {:.2f}", f.mean_gamma) : ""));
    return f;
  };
  auto median_run = [](std::vector<ConcurrencyFigure> runs) {
    std::sort(runs.begin(), runs.end(),
              [](const auto& a, const auto& b) { return a.aggregate_tok_per_s < b.aggregate_tok_per_s; });
    return runs[runs.size() / 2];
  };

  // Each run measures plain and then speculative streams back to back, and "x plain" is the median
  // of the runs' own ratios: this machine's speed drifts over minutes, so a ratio of two medians
  // taken minutes apart would mostly measure the drift. For the same reason a run of several plain
  // streams starts with one plain stream alone, and plain "x one stream" is the median of the
  // runs' own ratios too.
  for (int c : o.concurrency) {
    std::vector<ConcurrencyFigure> plain_runs, spec_runs;
    std::vector<double> vs_plain, decode_vs_plain, vs_one, decode_vs_one;
    for (int64_t run = 0; run < o.runs; ++run) {
      const ConcurrencyFigure one = c > 1 ? run_streams(1, false) : ConcurrencyFigure{};
      plain_runs.push_back(run_streams(c, false));
      if (one.aggregate_tok_per_s > 0)
        vs_one.push_back(plain_runs.back().aggregate_tok_per_s / one.aggregate_tok_per_s);
      if (one.decode_aggregate_tok_per_s > 0)
        decode_vs_one.push_back(plain_runs.back().decode_aggregate_tok_per_s / one.decode_aggregate_tok_per_s);
      if (!drafter) continue;
      spec_runs.push_back(run_streams(c, true));
      const ConcurrencyFigure &p = plain_runs.back(), &q = spec_runs.back();
      if (p.aggregate_tok_per_s > 0) vs_plain.push_back(q.aggregate_tok_per_s / p.aggregate_tok_per_s);
      if (p.decode_aggregate_tok_per_s > 0)
        decode_vs_plain.push_back(q.decode_aggregate_tok_per_s / p.decode_aggregate_tok_per_s);
    }
    ConcurrencyFigure& plain = report.figures.emplace_back(median_run(plain_runs));
    if (!vs_one.empty()) plain.vs_one_stream = median(vs_one);
    if (!decode_vs_one.empty()) plain.decode_vs_one_stream = median(decode_vs_one);
    {
      Scheduler scheduler(*model, pool, SchedulerOptions{c, o.step_rows, false});
      const std::vector<double> t =
          staggered_ttfts(scheduler, c, kStaggeredRequests, solo_ms / c, staggered_generation);
      plain.staggered_ttft_p50_ms = percentile(t, 0.5);
      plain.staggered_ttft_p99_ms = percentile(t, 0.99);
      log(fmt::format("concurrency {} staggered clients: TTFT p50 {:.0f} ms, p99 {:.0f} ms", c,
                      plain.staggered_ttft_p50_ms, plain.staggered_ttft_p99_ms));
    }
    if (!drafter) continue;
    ConcurrencyFigure& spec = report.figures.emplace_back(median_run(spec_runs));
    spec.vs_plain = vs_plain.empty() ? 0.0 : median(vs_plain);
    spec.decode_vs_plain = decode_vs_plain.empty() ? 0.0 : median(decode_vs_plain);
    if (o.runs > 1)
      log(
          fmt::format("concurrency {}: speculative / plain, median of {} back-to-back pairs: {:.2f} ({:.2f} while all "
                      "decode)",
                      c, o.runs, spec.vs_plain, spec.decode_vs_plain));
  }
  // Speculative "x one stream" (and plain at concurrency 1): the ratio of the reported runs.
  for (ConcurrencyFigure& f : report.figures) {
    const bool paired = !f.speculative && f.concurrency > 1;
    for (const ConcurrencyFigure& g : report.figures) {
      if (!paired && g.speculative == f.speculative && g.concurrency == 1 && g.aggregate_tok_per_s > 0)
        f.vs_one_stream = f.aggregate_tok_per_s / g.aggregate_tok_per_s;
      if (!paired && g.speculative == f.speculative && g.concurrency == 1 && g.decode_aggregate_tok_per_s > 0)
        f.decode_vs_one_stream = f.decode_aggregate_tok_per_s / g.decode_aggregate_tok_per_s;
      if (!f.speculative && !g.speculative && g.concurrency == 1 && g.staggered_ttft_p50_ms > 0)
        f.staggered_ttft_vs_one = f.staggered_ttft_p50_ms / g.staggered_ttft_p50_ms;
    }
  }
  model.reset();
  drafter.reset();
  report.bandwidth_gbs = measure_read_bandwidth_gbs(pool, 1ull << 30);
  report.machine_load = load_monitor.load();
  report.elapsed_s = ms_between(t_start, Clock::now()) / 1000.0;
  return report;
}

nlohmann::json concurrency_json(const ConcurrencyReport& r) {
  nlohmann::json figures = nlohmann::json::array();
  for (const ConcurrencyFigure& f : r.figures)
    figures.push_back({{"concurrency", f.concurrency},
                       {"mode", f.speculative ? "speculative" : "plain"},
                       {"aggregate_tok_per_s", f.aggregate_tok_per_s},
                       {"per_stream_tok_per_s", f.per_stream_tok_per_s},
                       {"ttft_p50_ms", f.ttft_p50_ms},
                       {"ttft_p99_ms", f.ttft_p99_ms},
                       {"wall_ms", f.wall_ms},
                       {"mean_gamma", f.mean_gamma},
                       {"acceptance_rate", f.acceptance_rate},
                       {"aggregate_vs_one_stream", f.vs_one_stream},
                       {"aggregate_vs_plain", f.vs_plain},
                       {"decode_aggregate_tok_per_s", f.decode_aggregate_tok_per_s},
                       {"decode_aggregate_vs_one_stream", f.decode_vs_one_stream},
                       {"decode_aggregate_vs_plain", f.decode_vs_plain},
                       {"staggered_ttft_p50_ms", f.staggered_ttft_p50_ms},
                       {"staggered_ttft_p99_ms", f.staggered_ttft_p99_ms},
                       {"staggered_ttft_vs_one_client", f.staggered_ttft_vs_one}});
  return {{"model", r.model_dir},
          {"drafter", r.drafter_dir},
          {"cpu_model", r.cpu_model},
          {"kernels", r.kernels},
          {"read_bandwidth_gb_per_s", r.bandwidth_gbs},
          {"threads", r.options.threads},
          {"precision", precision_name(r.options.precision)},
          {"kv_type", kv_type_name(r.options.kv_type)},
          {"prompt_tokens", r.options.prompt_tokens},
          {"tokens_per_stream", r.options.tokens},
          {"acceptance", r.options.acceptance},
          {"gamma", r.options.gamma},
          {"runs", r.options.runs},
          {"concurrency", figures},
          {"machine_load", machine_load_json(r.machine_load)},
          {"elapsed_s", r.elapsed_s}};
}

std::string concurrency_markdown(const ConcurrencyReport& r) {
  std::string out = fmt::format(
      "# specula bench --concurrency\n\nCPU {} | kernels {} | read bandwidth {:.1f} GB/s ({} threads) | {} precision | "
      "KV cache {}\n"
      "model {}{}\n{} prompt + {} generated tokens per stream; speculative: gamma {}, acceptance p = {}\n\n",
      r.cpu_model, r.kernels, r.bandwidth_gbs, r.options.threads, precision_name(r.options.precision),
      kv_type_name(r.options.kv_type), r.model_dir, r.drafter_dir.empty() ? "" : " + drafter " + r.drafter_dir,
      r.options.prompt_tokens, r.options.tokens, r.options.gamma, r.options.acceptance);
  out +=
      "aggregate: every stream's tokens over the wall time (prefills included); decode aggregate: tokens/s "
      "while all streams decode together (from the last first token to the first last token); TTFT: from the "
      "common start. Staggered clients (plain): each of N clients sends " +
      std::to_string(kStaggeredRequests) +
      " requests back to back, the clients' first requests spread evenly over one request's length; TTFT from "
      "each request's submission. Figures are the median run of " +
      std::to_string(r.options.runs) +
      "; each run measures one plain stream, then N plain streams, then N speculative streams back to back; plain x "
      "one stream and x plain are medians of the runs' own ratios.\n\n";
  out +=
      "| streams | mode | aggregate tok/s | x one stream | x plain | decode aggregate tok/s | x one stream | x plain | "
      "per-stream tok/s | TTFT p50 ms | TTFT p99 ms | mean gamma | acceptance | staggered TTFT p50 ms | "
      "x one client | staggered TTFT p99 ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  auto ratio = [](bool show, double v) { return show ? fmt::format("{:.2f}", v) : std::string("-"); };
  for (const ConcurrencyFigure& f : r.figures)
    out += fmt::format(
        "| {} | {} | {:.2f} | {:.2f} | {} | {:.2f} | {:.2f} | {} | {:.2f} | {:.0f} | {:.0f} | {} | {} | {} | {} | {} "
        "|\n",
        f.concurrency, f.speculative ? "speculative" : "plain", f.aggregate_tok_per_s, f.vs_one_stream,
        ratio(f.speculative, f.vs_plain), f.decode_aggregate_tok_per_s, f.decode_vs_one_stream,
        ratio(f.speculative, f.decode_vs_plain), f.per_stream_tok_per_s, f.ttft_p50_ms, f.ttft_p99_ms,
        ratio(f.speculative, f.mean_gamma), ratio(f.speculative, f.acceptance_rate),
        f.speculative ? "-" : fmt::format("{:.0f}", f.staggered_ttft_p50_ms),
        ratio(!f.speculative, f.staggered_ttft_vs_one),
        f.speculative ? "-" : fmt::format("{:.0f}", f.staggered_ttft_p99_ms));
  out += "\n" + machine_load_line(r.machine_load);
  out += fmt::format("\n{:.0f} s\n", r.elapsed_s);
  return out;
}

}  // namespace specula::bench
