#pragma once
// Parse-time checks of the numeric flags: CLI11 validators over the shared ranges
// (engine/option_limits.h), so a value out of range is a usage error (exit 2) that names the flag,
// the value and the allowed range before anything loads; and the checks that need a look at the
// machine or the model's config (threads above the cores, a context above the model's limit).
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "specula/engine/option_limits.h"

namespace specula::cli {

CLI::Validator in_range(const limits::IntRange& range);
CLI::Validator in_range(const limits::RealRange& range);
// "auto" or a draft length in limits::kGamma.
CLI::Validator gamma_value();

// Warns on stderr when `threads` asks for more threads than the machine has (they would share
// cores and slow every step); the run goes on with what was asked.
void warn_if_threads_above_cores(const char* flag, int threads);

// Refuses (CLI::ValidationError, exit 2) a context limit above the max_position_embeddings in
// `model_dir`'s config.json. A config that cannot be read is left to the model load to report.
void check_context_flag(const char* flag, int64_t context, const std::string& model_dir);

}  // namespace specula::cli
