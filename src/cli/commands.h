#pragma once
// Each subcommand lives in its own file and registers itself on the CLI11 app here.
// A command's callback throws specula::Error for runtime failures (exit 1); CLI11 reports usage
// errors (exit 2).
#include <CLI/CLI.hpp>

namespace specula::cli {

void add_synth_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_render_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_detokenize_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_cache_command(CLI::App& app);

}  // namespace specula::cli
