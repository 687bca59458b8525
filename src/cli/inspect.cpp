// `specula inspect`: loads (and thereby validates) a checkpoint, optionally with a drafter, and
// prints its summary as text or JSON.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "specula/io/checkpoint.h"
#include "specula/io/checkpoint_summary.h"

namespace specula::cli {

namespace {

struct InspectArgs {
  std::string dir;
  std::string draft_dir;
  bool json = false;
};

void run_inspect(const InspectArgs& a) {
  const TargetCheckpoint target = load_target(a.dir);
  std::optional<DrafterCheckpoint> drafter;
  if (!a.draft_dir.empty()) drafter = load_drafter(a.draft_dir);
  const CheckpointSummary s = summarize_checkpoint(target, drafter ? &*drafter : nullptr);
  const std::string text = a.json ? summary_json(s).dump(2) + "\n" : format_summary(s);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "validate a checkpoint and summarize it (geometry, storage, bytes per token)");
  cmd->add_option("dir", args->dir, "target checkpoint directory")->required();
  cmd->add_option("--draft", args->draft_dir, "drafter checkpoint directory (also checks compatibility)");
  cmd->add_flag("--json", args->json, "print JSON instead of text");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace specula::cli
