#include "specula/bench/bench_suite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "specula/bench/compute_roof.h"
#include "specula/io/checkpoint_summary.h"
#include "specula/kernels/packed_affine.h"
#include "specula/model/drafter.h"
#include "specula/model/generate.h"
#include "specula/model/target_benchmark.h"
#include "specula/model/target_model.h"
#include "specula/speculative/controlled_acceptance.h"
#include "specula/speculative/draft_benchmark.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"
#include "specula/util/memory_bandwidth.h"
#include "specula/util/progress.h"

namespace specula::bench {

namespace {

using Clock = std::chrono::steady_clock;

// The raw samples of one thread count, one entry per run.
struct ThreadSamples {
  std::vector<double> prefill_tok_per_s, ttft_ms, decode_tok_per_s, decode_ms_per_token, decode_cpu_ms_per_token,
      step_decode_ms, draft_step_ms, draft_step_ratio;
  std::map<int64_t, std::vector<double>> verify_ratio;
  // Indexed like the (p, gamma) list.
  std::vector<std::vector<double>> plain_tps, spec_tps, speedup, acceptance, mean_gamma;
};

struct SpecCase {
  double p;
  std::string gamma_text;
  GammaChoice gamma;
};

std::vector<SpecCase> spec_cases(const SuiteOptions& o) {
  std::vector<SpecCase> cases;
  for (double p : o.acceptance)
    for (const std::string& g : o.gammas) {
      GammaChoice c = parse_gamma_choice(g);
      if (c.automatic) c.max_gamma = o.auto_max_gamma;
      cases.push_back({p, g, c});
    }
  return cases;
}

int64_t largest_gamma(const std::vector<SpecCase>& cases) {
  int64_t g = 0;
  for (const SpecCase& c : cases) g = std::max(g, c.gamma.automatic ? c.gamma.max_gamma : c.gamma.fixed);
  return g;
}

double median_of(const std::vector<double>& v) { return v.empty() ? 0.0 : median(v); }

struct SpecRunPlains {
  double slowest = 0.0, fastest = 0.0;  // tok/s of the run's plain generations
};

// One run of the speculative cases, grouped by acceptance. Plain decoding of the same tokens is
// timed before the first group and after every group, and a case's speedup is over the geometric
// mean of the two plain runs around its group: this machine's speed drifts over minutes, and
// against a single plain run before all the cases (minutes of them) the speedups would mostly
// measure that drift. Odd runs take the groups and the gammas within them in reverse order, so that a
// drift within a group does not favour the same gamma in every run.
SpecRunPlains run_spec_cases(const TargetModel& model, TargetCache& cache, const Drafter& drafter,
                             const std::vector<int32_t>& prompt, const std::vector<int32_t>& reference,
                             const std::vector<SpecCase>& cases, const SuiteOptions& o, int64_t run, ThreadPool& pool,
                             ThreadSamples& s) {
  GenerateOptions go;
  go.max_tokens = o.spec_tokens;
  go.ignore_eos = true;
  SpecRunPlains plains;
  auto time_plain = [&] {
    const double tps = generate_greedy(model, cache, prompt, go, pool).stats.decode_tok_per_s();
    plains.slowest = plains.slowest == 0.0 ? tps : std::min(plains.slowest, tps);
    plains.fastest = std::max(plains.fastest, tps);
    return tps;
  };
  std::vector<std::pair<size_t, size_t>> groups;  // [begin, end) of the cases of one acceptance
  for (size_t i = 0; i < cases.size(); ++i)
    if (i == 0 || cases[i].p != cases[i - 1].p)
      groups.emplace_back(i, i + 1);
    else
      groups.back().second = i + 1;
  const bool reverse = run % 2 == 1;
  if (reverse) std::reverse(groups.begin(), groups.end());
  double before = time_plain();
  for (const auto& [begin, end] : groups) {
    std::vector<size_t> order;
    for (size_t i = begin; i < end; ++i) order.push_back(i);
    if (reverse) std::reverse(order.begin(), order.end());
    std::vector<double> spec(cases.size());
    for (size_t i : order) {
      const SpeculativeResult r = run_controlled_acceptance(model, cache, drafter, prompt, reference, cases[i].p,
                                                            cases[i].gamma, o.spec_tokens, o.seed, pool);
      spec[i] = r.stats.decode_tok_per_s();
      s.acceptance[i].push_back(r.stats.acceptance_rate());
      s.mean_gamma[i].push_back(r.stats.rounds > 0 ? static_cast<double>(r.stats.drafted) / r.stats.rounds : 0.0);
    }
    const double after = time_plain();
    const double plain = std::sqrt(before * after);
    for (size_t i = begin; i < end; ++i) {
      s.plain_tps[i].push_back(plain);
      s.spec_tps[i].push_back(spec[i]);
      s.speedup[i].push_back(plain > 0 ? spec[i] / plain : 0.0);
    }
    before = after;
  }
  return plains;
}

// Under int8 the attention's q, k and v projections run fast's int16 kernels
// (Linear::attention_inputs): the share of the matrix bytes the int16 rates apply to.
double int16_share(const TargetModel& model, Precision precision) {
  if (precision != Precision::Int8) return 0.0;
  const uint64_t all = model.weights().matrix_bytes_per_token(true);
  return all > 0 ? static_cast<double>(model.weights().attention_input_bytes_per_token(true)) / all : 0.0;
}

// In-cache rates by width as the model's forward mixes the kernels: `measure` times them in one
// precision; under int8 its int16 rates are blended in by int16_share.
std::map<int64_t, double> model_rates(const TargetModel& model, Precision precision,
                                      const std::function<std::map<int64_t, double>(Precision)>& measure) {
  const std::map<int64_t, double> rates = measure(precision);
  const double share = int16_share(model, precision);
  return share > 0.0 ? blend_rates(rates, measure(Precision::Fast), share) : rates;
}

}  // namespace

SuiteOptions SuiteOptions::quick() {
  SuiteOptions o;
  o.runs = 1;
  o.prompt_tokens = 32;
  o.decode_tokens = 4;
  o.cost_repeats = 1;
  o.spec_prompt_tokens = 8;
  o.spec_tokens = 8;
  o.bandwidth_bytes = 64ull << 20;
  return o;
}

void SuiteOptions::validate() const {
  if (threads.empty()) fail("bench: no thread counts given");
  for (int t : threads)
    if (t < 1 || t > 1024) fail("bench: thread count {} must be in [1, 1024]", t);
  auto positive = [](const char* name, int64_t v) {
    if (v < 1) fail("bench: {} {} must be >= 1", name, v);
  };
  positive("runs", runs);
  positive("prompt tokens", prompt_tokens);
  positive("decode tokens", decode_tokens);
  positive("cost repeats", cost_repeats);
  positive("speculative prompt tokens", spec_prompt_tokens);
  positive("speculative tokens", spec_tokens);
  if (max_verify_width < 2) fail("bench: max verify width {} must be >= 2", max_verify_width);
  for (double p : acceptance)
    if (!(p >= 0.0 && p <= 1.0)) fail("bench: acceptance {} must be in [0, 1]", p);
  if (auto_max_gamma < 1 || auto_max_gamma + 1 > max_verify_width)
    fail("bench: auto's largest gamma {} needs verify widths up to {}, measured up to {}", auto_max_gamma,
         auto_max_gamma + 1, max_verify_width);
  for (const SpecCase& c : spec_cases(*this))
    if (!c.gamma.automatic && (c.gamma.fixed < 1 || c.gamma.fixed + 1 > max_verify_width))
      fail("bench: gamma {} must be in [1, {}] (verify widths measured up to {})", c.gamma.fixed, max_verify_width - 1,
           max_verify_width);
}

std::map<int, double> measure_bandwidths(const SuiteOptions& o, const Log& log) {
  std::map<int, double> out;
  for (int t : o.threads) {
    if (out.count(t) != 0) continue;
    ThreadPool pool(t);
    out[t] = measure_read_bandwidth_gbs(pool, o.bandwidth_bytes);
    log(fmt::format("read bandwidth, {} thread(s), {} MiB buffer: {:.1f} GB/s", t, o.bandwidth_bytes >> 20, out[t]));
  }
  return out;
}

ModelFigures bench_model(const ModelToBench& m, const SuiteOptions& o, const Log& log) {
  o.validate();
  const std::vector<SpecCase> cases = spec_cases(o);
  const bool with_drafter = !m.drafter_dir.empty();
  ModelFigures fig;
  fig.name = m.name;
  fig.model_dir = m.model_dir;
  fig.drafter_dir = m.drafter_dir;
  fig.peak_rss_isolated = reset_peak_rss();

  TargetOptions to;
  to.precision = o.precision;
  to.kv_type = o.kv_type;
  to.load_threads = *std::max_element(o.threads.begin(), o.threads.end());
  to.packed_cache_dir = o.packed_cache_dir;
  to.rollback_reserve = std::max({to.rollback_reserve, o.max_verify_width, largest_gamma(cases) + 1});
  // Loads are mmap + validation: cheap, so the load time is a median of runs too.
  std::unique_ptr<TargetModel> model;
  std::vector<double> loads;
  std::vector<std::string> packed_loads;  // fast precision: each load's time and packed-weight source
  for (int64_t r = 0; r < o.runs; ++r) {
    model.reset();
    const auto t0 = Clock::now();
    model = TargetModel::load(m.model_dir, to);
    loads.push_back(ms_since(t0));
    if (model->packed_source() != PackedSource::None)
      packed_loads.push_back(fmt::format("{:.0f} ms {}", loads.back(), packed_source_name(model->packed_source())));
  }
  fig.load_ms = median(loads);
  if (!packed_loads.empty()) log(fmt::format("{}: target loads: {}", m.name, fmt::join(packed_loads, ", ")));
  std::unique_ptr<Drafter> drafter;
  if (with_drafter) {
    loads.clear();
    for (int64_t r = 0; r < o.runs; ++r) {
      drafter.reset();
      const auto t0 = Clock::now();
      drafter = Drafter::load(m.drafter_dir, *model, DrafterConvention::Ollama, o.draft_quant, o.draft_head);
      loads.push_back(ms_since(t0));
    }
    fig.drafter_load_ms = median(loads);
    fig.drafter_bytes_on_disk = drafter->checkpoint().store.total_bytes();
    const std::string copies = drafter_built_note(*drafter);
    fig.drafter_weights = copies.empty() ? "as stored" : copies;
  }
  const CheckpointSummary summary = summarize_checkpoint(model->checkpoint());
  // What a decode step reads: the packed copies where the fast kernels have them.
  fig.bytes_per_token = model->weights().decode_bytes_per_token(summary, MatrixBytes::Packed);
  const WeightMatrix& head = model->weights().lm_head;
  const auto head_bytes = static_cast<uint64_t>(head.packed != nullptr ? packed_bytes(head) : head.bytes());
  fig.prefill_bytes_per_token = fig.bytes_per_token > head_bytes ? fig.bytes_per_token - head_bytes : 0;
  fig.bytes_on_disk = summary.bytes_on_disk;
  const int64_t context_needed =
      std::max(o.prompt_tokens + o.decode_tokens + o.max_verify_width + 1,
               o.spec_prompt_tokens + o.spec_tokens + largest_gamma(cases) + 2);  // + the reference's reach
  if (context_needed > model->max_context())
    fail("bench: {} needs a context of {} tokens, the model allows {}", m.name, context_needed, model->max_context());
  log(fmt::format("{}: loaded in {:.0f} ms ({} on disk, {} per token){}", m.name, fig.load_ms,
                  format_bytes(fig.bytes_on_disk), format_bytes(fig.bytes_per_token),
                  with_drafter ? fmt::format(", drafter in {:.0f} ms ({})", fig.drafter_load_ms, fig.drafter_weights)
                               : std::string()));

  const std::vector<int32_t> prompt = bench_prompt(model->vocab_size(), o.prompt_tokens, o.seed);
  const std::vector<int32_t> spec_prompt = bench_prompt(model->vocab_size(), o.spec_prompt_tokens, o.seed + 1);
  TargetCache cache = model->new_cache();
  std::vector<int32_t> reference;  // plain greedy continuation of spec_prompt (thread-count invariant)

  for (int t : o.threads) {
    ThreadPool pool(t);
    if (with_drafter && reference.empty()) {
      GenerateOptions go;
      go.max_tokens = o.spec_tokens + largest_gamma(cases) + 1;
      go.ignore_eos = true;
      reference = generate_greedy(*model, cache, spec_prompt, go, pool).tokens;
    }
    ThreadSamples s;
    s.plain_tps.resize(cases.size());
    s.spec_tps.resize(cases.size());
    s.speedup.resize(cases.size());
    s.acceptance.resize(cases.size());
    s.mean_gamma.resize(cases.size());
    for (int64_t run = 0; run < o.runs; ++run) {
      const auto t_run = Clock::now();
      const GenerationTiming g = time_generation(*model, cache, prompt, o.decode_tokens, pool);
      s.prefill_tok_per_s.push_back(g.prefill_tok_per_s);
      s.ttft_ms.push_back(g.ttft_ms);
      s.decode_tok_per_s.push_back(g.decode_tok_per_s);
      s.decode_ms_per_token.push_back(g.decode_ms_per_token);
      s.decode_cpu_ms_per_token.push_back(g.decode_cpu_ms_per_token);

      const StepCosts c = time_target_steps(*model, cache, g.tokens.back(), o.max_verify_width, o.cost_repeats, pool);
      s.step_decode_ms.push_back(c.decode_ms);
      for (int64_t w = 2; w <= o.max_verify_width; ++w) s.verify_ratio[w].push_back(c.verify_ratio(w));
      fig.kv_bytes = std::max(fig.kv_bytes, cache.allocated_bytes());
      std::string line =
          fmt::format("{}, {} thread(s), run {}/{}: prefill {:.1f} tok/s, decode {:.2f} tok/s, verify(4) {:.2f}x",
                      m.name, t, run + 1, o.runs, g.prefill_tok_per_s, g.decode_tok_per_s,
                      o.max_verify_width >= 4 ? c.verify_ratio(4) : c.verify_ratio(2));

      if (with_drafter) {
        // The drafter's input: the target's final-norm hidden of the newest position.
        ForwardRequest req;
        req.rows = OutputRows::Last;
        req.logits = false;
        req.hidden = true;
        const ForwardOutput out = model->forward(cache, std::span<const int32_t>(&g.tokens.back(), 1), req, pool);
        const double d =
            time_draft_step(*model, cache, *drafter, g.tokens.back(), out.hidden_row(0), o.cost_repeats, pool);
        s.draft_step_ms.push_back(d);
        s.draft_step_ratio.push_back(c.decode_ms > 0 ? d / c.decode_ms : 0.0);

        const SpecRunPlains plains =
            run_spec_cases(*model, cache, *drafter, spec_prompt, reference, cases, o, run, pool, s);
        line += fmt::format(", draft step {:.3f}x, plain {:.2f}-{:.2f} tok/s", d / c.decode_ms, plains.slowest,
                            plains.fastest);
      }
      const double run_s = ms_since(t_run) / 1000.0;
      log(line + fmt::format(" ({:.0f} s{})", run_s,
                             run + 1 < o.runs
                                 ? fmt::format(", ~{:.0f} s more at {} thread(s)", run_s * (o.runs - run - 1), t)
                                 : std::string()));
    }

    ThreadFigures tf;
    tf.threads = t;
    const WeightMatrix& like = model->weights().lm_head;
    tf.compute_roof_bytes_per_s = model_rates(
        *model, o.precision, [&](Precision p) { return measure_compute_roof(like, o.max_verify_width, p, pool); });
    log(fmt::format("{}: matmul kernels in cache, {} thread(s), GB of weights/s: 1 row {:.0f}, {} rows {:.0f}", m.name,
                    t, tf.compute_roof_bytes_per_s.at(1) / 1e9, o.max_verify_width,
                    tf.compute_roof_bytes_per_s.at(o.max_verify_width) / 1e9));
    tf.prefill_roof_rows = std::min(o.prompt_tokens, to.prefill_chunk);
    const int64_t rows = tf.prefill_roof_rows;
    const std::map<int64_t, double> prefill_roof = model_rates(*model, o.precision, [&](Precision p) {
      return std::map<int64_t, double>{{rows, measure_prefill_roof(like, rows, p, pool)}};
    });
    tf.prefill_roof_bytes_per_s = prefill_roof.count(rows) != 0 ? prefill_roof.at(rows) : 0.0;
    tf.prefill_tok_per_s = median(s.prefill_tok_per_s);
    tf.ttft_ms = median(s.ttft_ms);
    tf.decode_tok_per_s = median(s.decode_tok_per_s);
    tf.decode_ms_per_token = median(s.decode_ms_per_token);
    tf.decode_cpu_ms_per_token = median(s.decode_cpu_ms_per_token);
    tf.step_decode_ms = median(s.step_decode_ms);
    for (const auto& [w, v] : s.verify_ratio) tf.verify_cost_ratio[w] = median(v);
    if (with_drafter) {
      tf.draft_step_ms = median(s.draft_step_ms);
      tf.draft_step_ratio = median(s.draft_step_ratio);
      for (size_t i = 0; i < cases.size(); ++i) {
        SpecFigure f;
        f.p = cases[i].p;
        f.gamma = cases[i].gamma_text;
        f.plain_tok_per_s = median_of(s.plain_tps[i]);
        f.spec_tok_per_s = median_of(s.spec_tps[i]);
        f.speedup = median_of(s.speedup[i]);
        f.acceptance_rate = median_of(s.acceptance[i]);
        f.mean_gamma = median_of(s.mean_gamma[i]);
        const GammaChoice& gc = cases[i].gamma;
        auto expected = [&](int64_t gamma) {
          return gamma == 0 ? 1.0
                            : expected_speedup(f.p, gamma, *tf.draft_step_ratio, tf.verify_cost_ratio.at(gamma + 1));
        };
        if (gc.automatic) {
          // What a policy knowing p and the costs would reach: the best gamma (0 = plain).
          f.expected_speedup = 1.0;
          for (int64_t gamma = 1; gamma <= gc.max_gamma; ++gamma)
            f.expected_speedup = std::max(f.expected_speedup, expected(gamma));
          f.ideal_speedup = ideal_speedup(f.p, gc.max_gamma);
        } else {
          f.expected_speedup = expected(gc.fixed);
          f.ideal_speedup = ideal_speedup(f.p, gc.fixed);
        }
        tf.spec.push_back(f);
      }
    }
    fig.threads.push_back(std::move(tf));
  }
  fig.peak_rss_bytes = peak_rss_bytes();
  return fig;
}

}  // namespace specula::bench
