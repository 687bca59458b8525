#pragma once
// An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with an HTTP
// status. Request parsing throws it; the HTTP layer turns it into the response.
#include <stdexcept>
#include <string>

namespace specula::server {

struct ApiError : std::runtime_error {
  int status;
  std::string type;   // invalid_request_error, authentication_error, rate_limit_error, ...
  std::string param;  // the offending field ("messages[1].content"), empty when none
  std::string code;   // a machine-readable code, empty when none

  ApiError(int status_, std::string type_, const std::string& message, std::string param_ = {}, std::string code_ = {})
      : std::runtime_error(message),
        status(status_),
        type(std::move(type_)),
        param(std::move(param_)),
        code(std::move(code_)) {}
};

// 400 invalid_request_error naming `param`.
inline ApiError invalid_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", message, param);
}

}  // namespace specula::server
