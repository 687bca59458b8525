#pragma once
// Runs the `specula` CLI (or any shell command) from an integration test and captures its output.
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>

namespace specula::test {

struct CliResult {
  int code = -1;       // exit status (-1: did not exit normally)
  std::string out;     // stdout (and stderr where merged)
  double seconds = 0;  // wall time
};

// Runs `cmd` through the shell (the caller quotes and redirects).
inline CliResult run_shell(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 65536> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Runs the CLI with `args` (shell-quoted by the caller); stderr is captured too with merge_stderr,
// else discarded. Without SPECULA_PACKED_CACHE in the environment the on-disk caches are off: a
// test never writes into the cache directory of the user running it (tests that exercise the
// caches choose a directory of their own).
inline CliResult run_cli(const std::string& args, bool merge_stderr = false) {
  return run_shell("SPECULA_PACKED_CACHE=\"${SPECULA_PACKED_CACHE:-off}\" " + std::string(SPECULA_BINARY) + " " + args +
                   (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

// run_cli with `env` ("NAME=value ... ", shell-quoted by the caller) before the binary.
inline CliResult run_cli_env(const std::string& env, const std::string& args, bool merge_stderr = false) {
  return run_shell(env + std::string(SPECULA_BINARY) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

}  // namespace specula::test
