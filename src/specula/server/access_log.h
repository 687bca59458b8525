#pragma once
// The server's access log: one line per request with who asked for what, the status and what it
// cost (tokens in and out, time to first token, duration); never the prompt or the answer.
//   2026-12-03T13:40:00Z 127.0.0.1 "POST /v1/chat/completions" 200 in=15 out=8 ttft_ms=12.3 ms=45.6
// Fields a request does not have (tokens of a GET) are "-".
#include <cstdint>
#include <ctime>
#include <string>

namespace specula::server {

struct AccessRecord {
  std::string remote_addr;
  std::string method;
  std::string path;
  int status = 0;
  int64_t prompt_tokens = -1;  // -1: not a generation
  int64_t completion_tokens = -1;
  double time_to_first_token_ms = -1.0;  // -1: no token was generated
  double duration_ms = 0.0;              // from the request's first bytes to the end of its response
};

// The line for `record` at `now` (UTC, seconds), without a newline. Method and path are cut to a
// bounded length and their control characters and quotes replaced, so a client cannot forge lines.
std::string access_log_line(const AccessRecord& record, std::time_t now);

}  // namespace specula::server
