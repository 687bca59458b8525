#include "specula/server/metrics.h"

#include <fmt/format.h>

namespace specula::server {

namespace {

// Prometheus floats: shortest round-trip text, "+Inf" for infinity.
std::string number(double x) { return fmt::format("{}", x); }

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, number(bounds_[i]), cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, number(sum_), name, count_);
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::add_tokens(int64_t prompt, int64_t cached, int64_t generated, int64_t drafted, int64_t accepted) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt;
  cached_prompt_tokens_ += cached;
  generation_tokens_ += generated;
  draft_tokens_ += drafted;
  accepted_tokens_ += accepted;
}

void Metrics::count_cancelled() {
  std::lock_guard lock(mutex_);
  ++cancelled_;
}

void Metrics::set_queue_depth(int64_t depth) {
  std::lock_guard lock(mutex_);
  queue_depth_ = depth;
}

void Metrics::set_load(int64_t running, int64_t waiting, double kv_utilization) {
  std::lock_guard lock(mutex_);
  running_ = running;
  waiting_ = waiting;
  kv_utilization_ = kv_utilization;
}

void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::observe_time_per_output_token(double seconds) {
  std::lock_guard lock(mutex_);
  tpot_.observe(seconds);
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(out, "specula_requests_total", "counter", "HTTP requests by endpoint and status code.");
  for (const auto& [key, count] : requests_) {
    out += fmt::format("specula_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  }
  auto counter = [&](const char* name, const char* help, int64_t value) {
    header(out, name, "counter", help);
    out += fmt::format("{} {}\n", name, value);
  };
  counter("specula_prompt_tokens_total", "Prompt tokens of finished generations.", prompt_tokens_);
  counter("specula_cached_prompt_tokens_total", "Prompt tokens reused from the prompt cache.", cached_prompt_tokens_);
  counter("specula_generation_tokens_total", "Generated tokens.", generation_tokens_);
  counter("specula_draft_tokens_total", "Tokens proposed by the draft source.", draft_tokens_);
  counter("specula_accepted_tokens_total", "Drafted tokens the target model accepted.", accepted_tokens_);
  counter("specula_requests_cancelled_total", "Generations cancelled (client gone or shutdown).", cancelled_);
  header(out, "specula_queue_depth", "gauge", "Requests waiting for the generation worker.");
  out += fmt::format("specula_queue_depth {}\n", queue_depth_);
  header(out, "specula_num_requests_running", "gauge", "Generations decoding now (at most --parallel).");
  out += fmt::format("specula_num_requests_running {}\n", running_);
  header(out, "specula_num_requests_waiting", "gauge", "Generations waiting for a slot.");
  out += fmt::format("specula_num_requests_waiting {}\n", waiting_);
  header(out, "specula_kv_cache_utilization", "gauge",
         "Context positions the running generations hold over --parallel x the context size (0..1).");
  out += fmt::format("specula_kv_cache_utilization {}\n", kv_utilization_);
  header(out, "specula_time_to_first_token_seconds", "histogram",
         "Time from the request's arrival (queueing included) to its first generated token.");
  ttft_.render("specula_time_to_first_token_seconds", out);
  header(out, "specula_time_per_output_token_seconds", "histogram", "Decode time per generated token after the first.");
  tpot_.render("specula_time_per_output_token_seconds", out);
  return out;
}

}  // namespace specula::server
