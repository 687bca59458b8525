#pragma once
// Server metrics in the Prometheus text exposition format (version 0.0.4), all named specula_*.
// Thread safe: HTTP threads and the generation worker update them concurrently.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace specula::server {

// A cumulative histogram with fixed upper bounds (the +Inf bucket is implicit).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of `name`.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), the last one is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  void count_request(const std::string& endpoint, int status);
  void add_tokens(int64_t prompt, int64_t cached, int64_t generated, int64_t drafted, int64_t accepted);
  void count_cancelled();
  void set_queue_depth(int64_t depth);
  // The load gauges an inference gateway routes by (its model-server protocol): generations
  // running, waiting, and the KV-cache utilization (0..1).
  void set_load(int64_t running, int64_t waiting, double kv_utilization);
  void observe_time_to_first_token(double seconds);
  void observe_time_per_output_token(double seconds);

  // The whole exposition text.
  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  int64_t prompt_tokens_ = 0;
  int64_t cached_prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int64_t draft_tokens_ = 0;
  int64_t accepted_tokens_ = 0;
  int64_t cancelled_ = 0;
  int64_t queue_depth_ = 0;
  int64_t running_ = 0;
  int64_t waiting_ = 0;
  double kv_utilization_ = 0.0;
  Histogram ttft_;
  Histogram tpot_;
};

}  // namespace specula::server
