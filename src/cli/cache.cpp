// `specula cache [--json]` lists what the on-disk caches hold (packed weights per checkpoint
// directory, converted GGUF images, temporaries of interrupted writes), each with the checkpoint it
// was made from, its size and whether a load would still use it; `specula cache prune [--all]
// [--dry-run]` removes the entries no load will use again (or, with --all, every entry not being
// written right now). The directory is the one every other command uses (SPECULA_PACKED_CACHE,
// SPECULA_CACHE_DIR, XDG_CACHE_HOME, HOME; model/packed_cache.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "specula/model/cache_inventory.h"
#include "specula/model/packed_cache.h"
#include "specula/util/error.h"

namespace specula::cli {

namespace {

struct CacheArgs {
  bool json = false;
  bool all = false;
  bool dry_run = false;
};

std::string mib(uint64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20)); }

nlohmann::json entry_json(const CacheEntry& e) {
  return {{"kind", cache_entry_kind_name(e.kind)},
          {"state", cache_entry_state_name(e.state)},
          {"path", e.path},
          {"source", e.source},
          {"bytes", e.bytes},
          {"prunable", cache_entry_prunable(e.state)}};
}

void print_table(const std::vector<CacheEntry>& entries) {
  std::printf("| state | kind | MiB on disk | made from | path |\n|---|---|---|---|---|\n");
  for (const CacheEntry& e : entries) {
    std::printf("| %s | %s | %s | %s | %s |\n", cache_entry_state_name(e.state), cache_entry_kind_name(e.kind),
                mib(e.bytes).c_str(), e.source.empty() ? "?" : e.source.c_str(), e.path.c_str());
  }
}

std::string cache_dir_or_fail() {
  const std::string dir = default_packed_cache_dir();
  if (dir.empty())
    fail(
        "no cache directory: SPECULA_PACKED_CACHE is off, or none of SPECULA_CACHE_DIR, XDG_CACHE_HOME and HOME is "
        "set");
  return dir;
}

void run_list(const CacheArgs& a) {
  const std::string dir = cache_dir_or_fail();
  const std::vector<CacheEntry> entries = list_cache(dir);
  uint64_t total = 0, prunable = 0;
  for (const CacheEntry& e : entries) {
    total += e.bytes;
    if (cache_entry_prunable(e.state)) prunable += e.bytes;
  }
  if (a.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const CacheEntry& e : entries) list.push_back(entry_json(e));
    const nlohmann::json out = {{"dir", dir}, {"entries", list}, {"bytes", total}, {"prunable_bytes", prunable}};
    std::printf("%s\n", out.dump(1).c_str());
    return;
  }
  std::printf("cache directory %s: %zu entries, %s MiB; %s MiB no load will use again (specula cache prune)\n",
              dir.c_str(), entries.size(), mib(total).c_str(), mib(prunable).c_str());
  if (!entries.empty()) print_table(entries);
}

void run_prune(const CacheArgs& a) {
  const std::string dir = cache_dir_or_fail();
  std::vector<CacheEntry> chosen;
  if (a.dry_run) {
    for (const CacheEntry& e : list_cache(dir))
      if (e.state != CacheEntryState::InUse && (a.all || cache_entry_prunable(e.state))) chosen.push_back(e);
  } else {
    chosen = prune_cache(dir, a.all);
  }
  uint64_t bytes = 0;
  for (const CacheEntry& e : chosen) bytes += e.bytes;
  if (a.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const CacheEntry& e : chosen) list.push_back(entry_json(e));
    const nlohmann::json out = {{"dir", dir}, {"dry_run", a.dry_run}, {"removed", list}, {"bytes", bytes}};
    std::printf("%s\n", out.dump(1).c_str());
    return;
  }
  std::printf("%s %zu entries, %s MiB, from %s\n", a.dry_run ? "would remove" : "removed", chosen.size(),
              mib(bytes).c_str(), dir.c_str());
  if (!chosen.empty()) print_table(chosen);
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto args = std::make_shared<CacheArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cache", "list the on-disk caches (packed weights, converted GGUF images) and whether loads still use them");
  cmd->add_flag("--json", args->json, "print one JSON object instead of the table");
  CLI::App* prune = cmd->add_subcommand("prune", "remove cache entries no load will use again");
  prune->add_flag("--all", args->all, "remove every entry (except those being written now)");
  prune->add_flag("--dry-run", args->dry_run, "print what would be removed, remove nothing");
  prune->add_flag("--json", args->json, "print one JSON object instead of the table");
  prune->callback([args] { run_prune(*args); });
  cmd->callback([args, cmd] {
    if (cmd->get_subcommands().empty()) run_list(*args);
  });
}

}  // namespace specula::cli
