#include "specula/server/access_log.h"

#include <algorithm>

#include <fmt/format.h>

#include "specula/util/printable.h"

namespace specula::server {

namespace {

std::string quoted_safe(const std::string& text) {
  std::string out = printable_name(text);
  std::replace(out.begin(), out.end(), '"', '?');
  return out;
}

std::string count_or_dash(int64_t n) { return n < 0 ? std::string("-") : std::to_string(n); }

std::string ms_or_dash(double ms) { return ms < 0 ? std::string("-") : fmt::format("{:.1f}", ms); }

}  // namespace

std::string access_log_line(const AccessRecord& r, std::time_t now) {
  std::tm utc{};
  gmtime_r(&now, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return fmt::format("{} {} \"{} {}\" {} in={} out={} ttft_ms={} ms={:.1f}", when,
                     r.remote_addr.empty() ? std::string("-") : quoted_safe(r.remote_addr), quoted_safe(r.method),
                     quoted_safe(r.path), r.status, count_or_dash(r.prompt_tokens), count_or_dash(r.completion_tokens),
                     ms_or_dash(r.time_to_first_token_ms), r.duration_ms);
}

}  // namespace specula::server
