#pragma once
// Cross-origin requests from browsers (`serve --cors-origin`): which origins may read the
// responses, and the answer to a preflight (OPTIONS) request. Without configured origins the
// server sends no CORS headers, and browsers keep other sites' pages from reading its answers.
#include <string>
#include <vector>

namespace specula::server {

// The Access-Control-Allow-Origin value for a request whose Origin header is `origin`: "*" when
// `allowed` holds "*", the origin itself when `allowed` lists it, else empty (no header).
std::string allowed_origin(const std::vector<std::string>& allowed, const std::string& origin);

// What a preflight may ask for: the server's methods and the headers its clients send.
inline constexpr const char* kCorsAllowMethods = "GET, POST, OPTIONS";
inline constexpr const char* kCorsAllowHeaders = "Authorization, Content-Type";
inline constexpr const char* kCorsMaxAgeSeconds = "600";

}  // namespace specula::server
