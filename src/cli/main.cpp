// The `specula` program: subcommands are registered from their own files (commands.h).
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "specula/kernels/isa.h"
#include "specula/util/error.h"

namespace {

// CLI11 reports a word that is no subcommand only as "A subcommand is required"; name it and the
// valid ones instead. The main app has no option taking a value, so a first argument without a
// leading '-' can only be a subcommand. Returns true when it reported one.
bool report_unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string word = argv[1];
  std::vector<std::string> names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(const CLI::App*)>{})) {
    names.push_back(sub->get_name());
    known = known || sub->check_name(word);
  }
  if (known) return false;
  fmt::print(stderr, "error: unknown command '{}'; valid commands: {} (see specula --help)\n", word,
             fmt::join(names, ", "));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specula: Gemma 4 inference with speculative decoding"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] {
    return fmt::format("specula {} (kernels: {}, cpu supports: {})", SPECULA_VERSION,
                       specula::isa_name(specula::active_isa()), specula::isa_name(specula::detected_isa()));
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
  specula::cli::add_cache_command(app);
  if (report_unknown_command(app, argc, argv)) return 2;
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
