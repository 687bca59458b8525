// The `specula` program: subcommands are registered from their own files (commands.h).
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "specula/kernels/isa.h"
#include "specula/util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"specula: Gemma 4 inference with speculative decoding"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       [] {
                         return fmt::format("specula {} (kernels: {}, cpu supports: {})", SPECULA_VERSION,
                                            specula::isa_name(specula::active_isa()),
                                            specula::isa_name(specula::detected_isa()));
                       });
  specula::cli::add_synth_command(app);
  specula::cli::add_inspect_command(app);
  specula::cli::add_logits_command(app);
  specula::cli::add_run_command(app);
  specula::cli::add_bench_command(app);
  specula::cli::add_render_command(app);
  specula::cli::add_tokenize_command(app);
  specula::cli::add_detokenize_command(app);
  specula::cli::add_serve_command(app);
  specula::cli::add_chat_command(app);
  specula::cli::add_demo_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const specula::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
