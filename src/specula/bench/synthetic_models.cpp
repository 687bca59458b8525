#include "specula/bench/synthetic_models.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "specula/synth/plan.h"
#include "specula/synth/writer.h"
#include "specula/util/error.h"
#include "specula/util/progress.h"

namespace specula::bench {

namespace {

namespace fs = std::filesystem;

constexpr const char* kMarker = "specula-bench-synthetic.json";
constexpr int kMarkerFormat = 1;

nlohmann::json spec_json(const SyntheticModelSpec& s) {
  return {{"format", kMarkerFormat},    {"preset", s.preset},        {"bits", s.bits},
          {"group_size", s.group_size}, {"drafter", s.with_drafter}, {"seed", s.seed}};
}

// Every regular file below dir (relative path -> size), the marker excluded.
nlohmann::json file_sizes(const fs::path& dir) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == kMarker) continue;
    files[fs::relative(e.path(), dir).generic_string()] = static_cast<uint64_t>(e.file_size());
  }
  return files;
}

}  // namespace

std::string SyntheticModelSpec::name() const { return fmt::format("{}-q{}g{}", preset, bits, group_size); }

std::string default_bench_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return (fs::path(xdg) / "specula" / "bench").string();
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return (fs::path(home) / ".cache" / "specula" / "bench").string();
  fail("bench: neither XDG_CACHE_HOME nor HOME is set; pass --cache-dir");
}

bool synthetic_model_valid(const std::string& dir, const SyntheticModelSpec& spec, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  const fs::path marker = fs::path(dir) / kMarker;
  std::error_code ec;
  if (!fs::is_regular_file(marker, ec)) return no(fmt::format("{} is missing", marker.string()));
  nlohmann::json m;
  try {
    std::ifstream f(marker);
    m = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    return no(fmt::format("{} is unreadable: {}", marker.string(), e.what()));
  }
  if (!m.is_object() || m.value("spec", nlohmann::json()) != spec_json(spec))
    return no(fmt::format("{} describes another checkpoint", marker.string()));
  const nlohmann::json files = m.value("files", nlohmann::json());
  if (!files.is_object() || files.empty()) return no(fmt::format("{} lists no files", marker.string()));
  for (const auto& [name, size] : files.items()) {
    const fs::path p = fs::path(dir) / name;
    const auto have = fs::file_size(p, ec);
    if (ec) return no(fmt::format("{} is missing", p.string()));
    if (!size.is_number_unsigned() || have != size.get<uint64_t>())
      return no(fmt::format("{} has {} bytes, expected {}", p.string(), have, size.dump()));
  }
  return true;
}

SyntheticModel ensure_synthetic_model(const std::string& cache_dir, const SyntheticModelSpec& spec,
                                      const std::function<void(const std::string&)>& log) {
  const fs::path dir = fs::path(cache_dir) / spec.name();
  SyntheticModel out;
  out.model_dir = (dir / "model").string();
  if (spec.with_drafter) out.drafter_dir = (dir / "drafter").string();
  std::string why;
  if (synthetic_model_valid(dir.string(), spec, &why)) {
    log(fmt::format("reusing synthetic {} in {}", spec.name(), dir.string()));
    return out;
  }
  if (fs::exists(dir)) log(fmt::format("regenerating synthetic {}: {}", spec.name(), why));

  synth::SynthOptions o;
  o.preset = spec.preset;
  o.seed = spec.seed;
  o.quant = QuantSpec{spec.bits, spec.group_size, "affine"};
  synth::validate_options(o);
  const synth::CheckpointPlan target = synth::plan_target(o);
  std::optional<synth::CheckpointPlan> drafter;
  if (spec.with_drafter) drafter = synth::plan_drafter(o);
  const uint64_t need = target.data_bytes() + (drafter ? drafter->data_bytes() : 0);

  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) fail("bench: cannot create cache directory {}: {}", cache_dir, ec.message());
  const fs::space_info space = fs::space(cache_dir, ec);
  if (!ec && space.available < need + (need >> 4))
    fail("bench: {} needs {} for the synthetic {} but only {} is free there (pass --cache-dir elsewhere)", cache_dir,
         format_bytes(need), spec.name(), format_bytes(space.available));

  const fs::path tmp = fs::path(cache_dir) / fmt::format(".{}.partial-{}", spec.name(), static_cast<long>(getpid()));
  fs::remove_all(tmp, ec);
  log(fmt::format("writing synthetic {} ({}, seed {}) to {}: {}", spec.name(),
                  spec.with_drafter ? "with drafter" : "target only", spec.seed, dir.string(), format_bytes(need)));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    synth::WriteCheckpointOptions wo;
    wo.progress = true;  // a bar on a terminal only
    wo.progress_label = spec.name();
    synth::write_checkpoint(target, (tmp / "model").string(), wo);
    if (drafter) {
      wo.progress_label = spec.name() + " drafter";
      synth::write_checkpoint(*drafter, (tmp / "drafter").string(), wo);
    }
    const nlohmann::json marker = {{"spec", spec_json(spec)}, {"files", file_sizes(tmp)}};
    std::ofstream f(tmp / kMarker);
    f << marker.dump(2) << "\n";
    f.close();
    if (!f) fail("bench: cannot write {}", (tmp / kMarker).string());
    fs::remove_all(dir, ec);
    if (ec) fail("bench: cannot replace {}: {}", dir.string(), ec.message());
    fs::rename(tmp, dir, ec);
    if (ec) fail("bench: cannot move {} to {}: {}", tmp.string(), dir.string(), ec.message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log(fmt::format("wrote synthetic {} in {:.0f} s", spec.name(), s));
  out.written = true;
  return out;
}

}  // namespace specula::bench
