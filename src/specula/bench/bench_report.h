#pragma once
// The results of a `specula bench` run as one JSON object and as markdown tables.
//
// The JSON's top-level figures are those of the headline model (the one measured with a drafter,
// else the last) at its largest thread count: decode_tok_per_s, prefill_tok_per_s,
// time_to_first_token_ms, bytes_per_token, read_bandwidth_gb_per_s, roofline_fraction,
// verify_cost_ratio {"2": .., ...}, forward_floor_ms, verify_floor_ratio and compute_roof_gb_per_s
// (keyed by rows from 1; bench/compute_roof.h), draft_step_ratio, spec_speedup {"0.7": {"auto": .., "2": ..}},
// expected_speedup (same shape), load_ms, peak_rss_bytes; `models` holds every model's figures per
// thread count.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/bench/bench_suite.h"
#include "specula/util/machine_load.h"

namespace specula::bench {

struct SuiteReport {
  SuiteOptions options;
  std::string cpu_model;  // util/cpu_info.h
  std::string kernels;    // the active kernel set (kernels/isa.h) and the fast kernels
  int hardware_threads = 0;
  std::map<int, double> bandwidth_gbs;  // threads -> measured read bandwidth
  std::vector<ModelFigures> models;
  std::optional<MachineLoad> machine_load;  // over the whole run; nullopt without /proc
  double elapsed_s = 0.0;
};

// {"other_processes_fraction", "steal_fraction", "busy"}, or null when it was not measured.
nlohmann::json machine_load_json(const std::optional<MachineLoad>& load);
// "Machine load during this run: ...\n" (util/machine_load.h), or "" when it was not measured.
std::string machine_load_line(const std::optional<MachineLoad>& load);

// bytes_per_token x decode tok/s / read bandwidth at the same thread count (0 if unknown).
double roofline_fraction(const ModelFigures& model, const ThreadFigures& t, const std::map<int, double>& bandwidth);

nlohmann::json report_json(const SuiteReport& report);
std::string report_markdown(const SuiteReport& report);

}  // namespace specula::bench
