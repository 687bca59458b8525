#include "specula/bench/bench_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "specula/bench/compute_roof.h"
#include "specula/util/error.h"
#include "specula/util/progress.h"

namespace specula::bench {

namespace {

std::string p_key(double p) { return fmt::format("{}", p); }

const ModelFigures& headline_model(const SuiteReport& r) {
  if (r.models.empty()) fail("bench: no model was measured");
  for (auto it = r.models.rbegin(); it != r.models.rend(); ++it)
    if (!it->drafter_dir.empty()) return *it;
  return r.models.back();
}

const ThreadFigures& headline_threads(const ModelFigures& m) {
  if (m.threads.empty()) fail("bench: {} has no measurements", m.name);
  return *std::max_element(m.threads.begin(), m.threads.end(),
                           [](const ThreadFigures& a, const ThreadFigures& b) { return a.threads < b.threads; });
}

double bandwidth_at(const std::map<int, double>& bw, int threads) {
  const auto it = bw.find(threads);
  return it == bw.end() ? 0.0 : it->second;
}

std::map<int64_t, double> gb(const std::map<int64_t, double>& bytes) {
  std::map<int64_t, double> out;
  for (const auto& [w, v] : bytes) out[w] = v / 1e9;
  return out;
}

nlohmann::json ratio_object(const std::map<int64_t, double>& m) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [w, v] : m) o[std::to_string(w)] = v;
  return o;
}

// {"p": {"gamma": value}} from the spec figures.
template <typename F>
nlohmann::json by_p_gamma(const ThreadFigures& t, F&& value) {
  nlohmann::json o = nlohmann::json::object();
  for (const SpecFigure& f : t.spec) o[p_key(f.p)][f.gamma] = value(f);
  return o;
}

// The least time of a forward of w rows from the two roofs (bench/compute_roof.h).
std::map<int64_t, double> floor_ms(const ModelFigures& m, const ThreadFigures& t, const std::map<int, double>& bw) {
  return forward_floor_ms(t.compute_roof_bytes_per_s, bandwidth_at(bw, t.threads) * 1e9,
                          static_cast<double>(m.bytes_per_token));
}

// The most a prefill's matmuls allow, tok/s (bench/compute_roof.h); 0 if not measured.
double prefill_roof(const ModelFigures& m, const ThreadFigures& t) {
  return prefill_roof_tok_per_s(t.prefill_roof_bytes_per_s, t.prefill_roof_rows,
                                static_cast<double>(m.prefill_bytes_per_token));
}

// The same floors over the one-row floor (what a verify cost ratio could be at best).
std::map<int64_t, double> floor_ratios(const std::map<int64_t, double>& floor) {
  std::map<int64_t, double> out;
  for (const auto& [w, v] : floor) out[w] = v / floor.at(1);
  return out;
}

nlohmann::json thread_json(const ModelFigures& m, const ThreadFigures& t, const std::map<int, double>& bw) {
  nlohmann::json spec = nlohmann::json::array();
  for (const SpecFigure& f : t.spec)
    spec.push_back({{"p", f.p},
                    {"gamma", f.gamma},
                    {"plain_tok_per_s", f.plain_tok_per_s},
                    {"spec_tok_per_s", f.spec_tok_per_s},
                    {"speedup", f.speedup},
                    {"expected_speedup", f.expected_speedup},
                    {"ideal_speedup", f.ideal_speedup},
                    {"acceptance_rate", f.acceptance_rate},
                    {"mean_gamma", f.mean_gamma}});
  const double b = bandwidth_at(bw, t.threads);
  const std::map<int64_t, double> floor = floor_ms(m, t, bw);
  const double prefill = prefill_roof(m, t);
  return {{"threads", t.threads},
          {"prefill_tok_per_s", t.prefill_tok_per_s},
          {"prefill_roof_tok_per_s", prefill},
          {"prefill_roof_fraction", prefill > 0 ? t.prefill_tok_per_s / prefill : 0.0},
          {"time_to_first_token_ms", t.ttft_ms},
          {"decode_tok_per_s", t.decode_tok_per_s},
          {"decode_ms_per_token", t.decode_ms_per_token},
          {"decode_cpu_ms_per_token", t.decode_cpu_ms_per_token},
          {"read_bandwidth_gb_per_s", b},
          {"achieved_gb_per_s", static_cast<double>(m.bytes_per_token) * t.decode_tok_per_s / 1e9},
          {"roofline_fraction", roofline_fraction(m, t, bw)},
          {"decode_step_ms", t.step_decode_ms},
          {"verify_cost_ratio", ratio_object(t.verify_cost_ratio)},
          {"compute_roof_gb_per_s", ratio_object(gb(t.compute_roof_bytes_per_s))},
          {"forward_floor_ms", ratio_object(floor)},
          {"verify_floor_ratio", ratio_object(floor_ratios(floor))},
          {"draft_step_ms", t.draft_step_ms ? nlohmann::json(*t.draft_step_ms) : nlohmann::json()},
          {"draft_step_ratio", t.draft_step_ratio ? nlohmann::json(*t.draft_step_ratio) : nlohmann::json()},
          {"spec_speedup", by_p_gamma(t, [](const SpecFigure& f) { return f.speedup; })},
          {"expected_speedup", by_p_gamma(t, [](const SpecFigure& f) { return f.expected_speedup; })},
          {"spec", spec}};
}

double mb(uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }

}  // namespace

double roofline_fraction(const ModelFigures& m, const ThreadFigures& t, const std::map<int, double>& bw) {
  const double b = bandwidth_at(bw, t.threads);
  return b > 0 ? static_cast<double>(m.bytes_per_token) * t.decode_tok_per_s / 1e9 / b : 0.0;
}

nlohmann::json report_json(const SuiteReport& r) {
  const SuiteOptions& o = r.options;
  nlohmann::json bw = nlohmann::json::object();
  for (const auto& [t, v] : r.bandwidth_gbs) bw[std::to_string(t)] = v;
  nlohmann::json models = nlohmann::json::array();
  for (const ModelFigures& m : r.models) {
    nlohmann::json threads = nlohmann::json::object();
    for (const ThreadFigures& t : m.threads) threads[std::to_string(t.threads)] = thread_json(m, t, r.bandwidth_gbs);
    models.push_back({{"name", m.name},
                      {"model_dir", m.model_dir},
                      {"drafter_dir", m.drafter_dir},
                      {"load_ms", m.load_ms},
                      {"drafter_load_ms", m.drafter_load_ms},
                      {"drafter_weights", m.drafter_weights},
                      {"bytes_per_token", m.bytes_per_token},
                      {"prefill_bytes_per_token", m.prefill_bytes_per_token},
                      {"bytes_on_disk", m.bytes_on_disk},
                      {"drafter_bytes_on_disk", m.drafter_bytes_on_disk},
                      {"kv_bytes", m.kv_bytes},
                      {"peak_rss_bytes", m.peak_rss_bytes},
                      {"peak_rss_isolated", m.peak_rss_isolated},
                      {"threads", threads}});
  }
  const ModelFigures& hm = headline_model(r);
  const ThreadFigures& ht = headline_threads(hm);
  nlohmann::json j = thread_json(hm, ht, r.bandwidth_gbs);
  j.erase("spec");
  j["model"] = hm.name;
  j["bytes_per_token"] = hm.bytes_per_token;
  j["load_ms"] = hm.load_ms;
  j["peak_rss_bytes"] = hm.peak_rss_bytes;
  j["cpu_model"] = r.cpu_model;
  j["kernels"] = r.kernels;
  j["precision"] = precision_name(o.precision);
  j["kv_type"] = kv_type_name(o.kv_type);
  j["hardware_threads"] = r.hardware_threads;
  j["elapsed_s"] = r.elapsed_s;
  j["machine_load"] = machine_load_json(r.machine_load);
  j["read_bandwidth_gb_per_s_by_threads"] = bw;
  j["counts"] = {{"runs", o.runs},
                 {"prompt_tokens", o.prompt_tokens},
                 {"decode_tokens", o.decode_tokens},
                 {"cost_repeats", o.cost_repeats},
                 {"max_verify_width", o.max_verify_width},
                 {"spec_prompt_tokens", o.spec_prompt_tokens},
                 {"spec_tokens", o.spec_tokens},
                 {"auto_max_gamma", o.auto_max_gamma},
                 {"acceptance", o.acceptance},
                 {"gammas", o.gammas},
                 {"bandwidth_bytes", o.bandwidth_bytes}};
  j["models"] = models;
  return j;
}

nlohmann::json machine_load_json(const std::optional<MachineLoad>& load) {
  if (!load) return nullptr;
  return {{"other_processes_fraction", load->other_processes}, {"steal_fraction", load->steal}, {"busy", load->busy()}};
}

std::string machine_load_line(const std::optional<MachineLoad>& load) {
  return load ? "Machine load during this run: " + machine_load_text(*load) + "\n" : std::string();
}

std::string report_markdown(const SuiteReport& r) {
  const SuiteOptions& o = r.options;
  std::string md = fmt::format(
      "specula bench: CPU {}, kernels {}, precision {}, KV cache {}, {} hardware threads; every figure is the median "
      "of {} "
      "run(s)\n\n"
      "Counts: prefill prompt {} tokens, {} decode steps after it; step costs at that context from {} "
      "call(s) each (target widths: the median, taken in turn; drafter: the mean), verify widths 2..{}; speculative "
      "runs: {}-token prompt, {} tokens each, auto gamma up to {}.\n\n",
      r.cpu_model, r.kernels, precision_name(o.precision), kv_type_name(o.kv_type), r.hardware_threads, o.runs,
      o.prompt_tokens, o.decode_tokens, o.cost_repeats, o.max_verify_width, o.spec_prompt_tokens, o.spec_tokens,
      o.auto_max_gamma);
  md += "Read bandwidth measured by this run:";
  for (const auto& [t, v] : r.bandwidth_gbs) md += fmt::format(" {} thread(s) {:.1f} GB/s;", t, v);
  md += "\n" + machine_load_line(r.machine_load);
  md +=
      "\n| model | threads | load ms | TTFT ms | prefill tok/s | decode tok/s | decode CPU ms/token | MB/token | "
      "GB/s streamed | "
      "roofline | peak RSS MB | peak RSS - (weights on disk + KV) MB "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ModelFigures& m : r.models)
    for (const ThreadFigures& t : m.threads)
      md += fmt::format(
          "| {} | {} | {:.0f} | {:.0f} | {:.2f} | {:.2f} | {:.0f} | {:.0f} | {:.1f} | {:.0f}% | {:.0f}{} | {:.0f} |\n",
          m.name, t.threads, m.load_ms, t.ttft_ms, t.prefill_tok_per_s, t.decode_tok_per_s, t.decode_cpu_ms_per_token,
          mb(m.bytes_per_token), mb(m.bytes_per_token) * t.decode_tok_per_s / 1e3,
          100.0 * roofline_fraction(m, t, r.bandwidth_gbs), mb(m.peak_rss_bytes),
          m.peak_rss_isolated ? "" : " (since start)",
          mb(m.peak_rss_bytes) - mb(m.bytes_on_disk + m.drafter_bytes_on_disk) - mb(m.kv_bytes));

  for (const ModelFigures& m : r.models) {
    md += fmt::format("\n{}: cost relative to one decode step{}\n\n| threads | decode step ms | drafter step |", m.name,
                      m.drafter_dir.empty() ? std::string() : " (drafter weights: " + m.drafter_weights + ")");
    for (int64_t w = 2; w <= o.max_verify_width; ++w) md += fmt::format(" verify {} |", w);
    md += "\n|---|---|---|";
    for (int64_t w = 2; w <= o.max_verify_width; ++w) md += "---|";
    md += "\n";
    for (const ThreadFigures& t : m.threads) {
      md += fmt::format("| {} | {:.1f} | {} |", t.threads, t.step_decode_ms,
                        t.draft_step_ratio ? fmt::format("{:.3f}", *t.draft_step_ratio) : std::string("-"));
      for (const auto& [w, v] : t.verify_cost_ratio) md += fmt::format(" {:.2f} |", v);
      md += "\n";
    }
    md += fmt::format(
        "\n{}: forwards of w rows against their floor, max(bytes / read bandwidth, bytes / the matmul kernels' "
        "in-cache speed at w rows) (floor ratio: the floor over the one-row floor, the least a verify cost "
        "ratio can be)\n\n| threads | figure |",
        m.name);
    for (int64_t w = 1; w <= o.max_verify_width; ++w) md += fmt::format(" {} row{} |", w, w == 1 ? "" : "s");
    md += "\n|---|---|";
    for (int64_t w = 1; w <= o.max_verify_width; ++w) md += "---|";
    md += "\n";
    for (const ThreadFigures& t : m.threads) {
      const std::map<int64_t, double> floor = floor_ms(m, t, r.bandwidth_gbs);
      md += fmt::format("| {} | measured ms | {:.3g} |", t.threads, t.step_decode_ms);
      for (const auto& [w, v] : t.verify_cost_ratio) md += fmt::format(" {:.3g} |", v * t.step_decode_ms);
      md += fmt::format("\n| {} | floor ms |", t.threads);
      for (const auto& [w, v] : floor) md += fmt::format(" {:.3g} |", v);
      md += fmt::format("\n| {} | floor ratio |", t.threads);
      for (const auto& [w, v] : floor_ratios(floor)) md += fmt::format(" {:.2f} |", v);
      md += fmt::format("\n| {} | in-cache GB/s |", t.threads);
      for (const auto& [w, v] : gb(t.compute_roof_bytes_per_s)) md += fmt::format(" {:.0f} |", v);
      md += "\n";
    }
    for (const ThreadFigures& t : m.threads) {
      const double roof = prefill_roof(m, t);
      if (roof > 0)
        md += fmt::format(
            "\nPrefill, {} thread(s): {:.1f} tok/s, {:.0f} % of the matmul kernels' roof for it ({:.1f} tok/s: "
            "their in-cache rate at {} rows, {:.2f} GB of weights/s, times the rows over the {} a prompt token "
            "multiplies, the LM head aside)\n",
            t.threads, t.prefill_tok_per_s, 100.0 * t.prefill_tok_per_s / roof, roof, t.prefill_roof_rows,
            t.prefill_roof_bytes_per_s / 1e9, format_bytes(m.prefill_bytes_per_token));
    }
    if (m.drafter_dir.empty() || m.threads.empty() || m.threads.front().spec.empty()) continue;
    md += fmt::format(
        "\n{}: speculative decoding at controlled acceptance p, speedup over plain decoding of the same tokens "
        "(timed before and after each p's cases), measured (expected from p, gamma and the costs above; auto: mean "
        "gamma chosen)\n\n| threads | p | plain tok/s |",
        m.name);
    const bool auto_column = std::count(o.gammas.begin(), o.gammas.end(), "auto") > 0;
    for (const std::string& g : o.gammas) md += g == "auto" ? " auto |" : fmt::format(" gamma {} |", g);
    if (auto_column) md += " auto / best fixed |";
    md += "\n|---|---|---|";
    for (size_t i = 0; i < o.gammas.size() + (auto_column ? 1 : 0); ++i) md += "---|";
    md += "\n";
    for (const ThreadFigures& t : m.threads)
      for (double p : o.acceptance) {
        std::string row;
        double plain = 0.0, auto_speedup = 0.0, best_fixed = 0.0;
        for (const SpecFigure& f : t.spec) {
          if (f.p != p) continue;
          plain = f.plain_tok_per_s;
          row += fmt::format(" {:.2f}x ({:.2f}){} |", f.speedup, f.expected_speedup,
                             f.gamma == "auto" ? fmt::format(" g{:.1f}", f.mean_gamma) : std::string());
          if (f.gamma == "auto")
            auto_speedup = f.speedup;
          else
            best_fixed = std::max(best_fixed, f.speedup);
        }
        if (auto_column) row += best_fixed > 0 ? fmt::format(" {:.2f} |", auto_speedup / best_fixed) : " - |";
        md += fmt::format("| {} | {} | {:.2f} |{}\n", t.threads, p, plain, row);
      }
  }
  md += fmt::format("\nElapsed: {:.0f} s\n", r.elapsed_s);
  return md;
}

}  // namespace specula::bench
