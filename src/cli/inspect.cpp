// `specula inspect`: loads (and thereby validates) a checkpoint, optionally with a drafter, and
// prints its summary as text or JSON. With --check it also reads every float tensor's values and
// fails (exit 1) naming the tensors that hold NaN or infinity (io/tensor_check.h). A drafter that
// does not fit the target also fails (exit 1), after the report that lists why.
//
// A GGUF file is not converted for the summary: converting a multi-GB file takes most of a
// minute and writes an image larger than the file into the cache, where the summary needs only
// the tensors' names, shapes and formats. It is described instead (GgufLoadOptions::convert), or
// its cached image mapped when one is current; --check, which reads every value, converts it as
// every other command does.
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_path.h"
#include "specula/io/checkpoint.h"
#include "specula/io/checkpoint_summary.h"
#include "specula/io/gguf.h"
#include "specula/io/tensor_check.h"
#include "specula/kernels/isa.h"
#include "specula/model/gguf_image_cache.h"
#include "specula/model/gguf_target.h"
#include "specula/model/packed_cache.h"
#include "specula/model/target_weights.h"
#include "specula/util/error.h"

namespace specula::cli {

namespace {

struct InspectArgs {
  std::string dir;
  std::string draft_dir;
  bool json = false;
  bool check = false;
};

// The value scan of one checkpoint: a summary line (text) or object (JSON), and its problems.
struct ValueCheck {
  TensorValueCheck result;
  std::string label;  // "target" / "drafter"
};

nlohmann::json check_json(const TensorValueCheck& c) {
  nlohmann::json bad = nlohmann::json::array();
  for (const NonFiniteTensor& t : c.non_finite)
    bad.push_back({{"tensor", t.name},
                   {"file", t.file},
                   {"nan", t.count.nan},
                   {"inf", t.count.inf},
                   {"first_index", t.count.first_index}});
  return {{"tensors_checked", c.tensors_checked}, {"bytes_checked", c.bytes_checked}, {"non_finite", bad}};
}

std::string check_text(const ValueCheck& v) {
  const TensorValueCheck& c = v.result;
  std::string out =
      fmt::format("{} values: {} float tensors ({} bytes) checked, ", v.label, c.tensors_checked, c.bytes_checked);
  if (c.clean()) return out + "all finite\n";
  out += fmt::format("{} with NaN or infinite values:\n", c.non_finite.size());
  for (const NonFiniteTensor& t : c.non_finite) out += "  " + format_non_finite(t) + "\n";
  return out;
}

// GGUF files: the ggml types of each kind of tensor (layer tensors grouped by their name after
// `blk.N.`), e.g. `ffn_down.weight: q4_K ×30, q6_K ×12`.
std::map<std::string, std::map<std::string, int>> gguf_types_by_tensor(const std::string& file) {
  std::map<std::string, std::map<std::string, int>> out;
  const GgufFile gguf = GgufFile::open(file);
  for (const GgufTensor& t : gguf.tensors()) {
    std::string kind = t.name;
    if (kind.starts_with("blk.")) {
      const size_t dot = kind.find('.', 4);
      if (dot != std::string::npos) kind = kind.substr(dot + 1);
    }
    ++out[kind][std::string(ggml_type_name(t.type))];
  }
  return out;
}

std::string gguf_types_text(const std::map<std::string, std::map<std::string, int>>& types) {
  std::string out = "ggml types (tensor: type ×count):\n";
  for (const auto& [kind, counts] : types) {
    std::string line;
    for (const auto& [type, n] : counts) line += fmt::format("{}{} ×{}", line.empty() ? "" : ", ", type, n);
    out += fmt::format("  {}: {}\n", kind, line);
  }
  return out;
}

void run_inspect(const InspectArgs& a) {
  GgufLoadOptions gguf_options;
  gguf_options.image_cache_dir = gguf_image_cache_dir(default_packed_cache_dir());
  gguf_options.convert = a.check;
  const TargetCheckpoint target = load_any_target(a.dir, gguf_options);
  std::optional<DrafterCheckpoint> drafter;
  if (!a.draft_dir.empty()) drafter = load_any_drafter(a.draft_dir, gguf_options);
  CheckpointSummary s = summarize_checkpoint(target, drafter ? &*drafter : nullptr);
  // What a decode step reads in the default precision, as `bench` counts it (the packed layout of
  // this CPU's fast kernels), without packing anything.
  s.fast_bytes_per_token = make_target_weights(target).decode_bytes_per_token(s, MatrixBytes::FastPrecision);
  s.fast_kernels = std::string(isa_name(active_isa()));
  std::vector<ValueCheck> checks;
  if (a.check) {
    checks.push_back({check_tensor_values(target.store), "target"});
    if (drafter) checks.push_back({check_tensor_values(drafter->store), "drafter"});
  }
  const std::optional<std::string> gguf = gguf_file_of(a.dir);
  const std::optional<std::string> draft_gguf = a.draft_dir.empty() ? std::nullopt : gguf_file_of(a.draft_dir);
  std::map<std::string, std::map<std::string, int>> types, draft_types;
  if (gguf) types = gguf_types_by_tensor(*gguf);
  if (draft_gguf) draft_types = gguf_types_by_tensor(*draft_gguf);
  std::string text;
  if (a.json) {
    nlohmann::json doc = summary_json(s);
    if (gguf) doc["gguf"] = {{"file", *gguf}, {"ggml_types", types}};
    if (draft_gguf) doc["drafter_gguf"] = {{"file", *draft_gguf}, {"ggml_types", draft_types}};
    for (const ValueCheck& v : checks) doc["value_check"][v.label] = check_json(v.result);
    text = doc.dump(2) + "\n";
  } else {
    text = format_summary(s);
    if (gguf) text += gguf_types_text(types);
    if (draft_gguf) text += "drafter " + gguf_types_text(draft_types);
    for (const ValueCheck& v : checks) text += check_text(v);
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  size_t bad = 0;
  for (const ValueCheck& v : checks) bad += v.result.non_finite.size();
  if (bad > 0) fail("{} tensor(s) hold NaN or infinite values (listed above): the checkpoint's data is corrupt", bad);
  // Scripts check compatibility by the exit status; the report above already lists the reasons.
  if (s.drafter && !s.drafter->compat_problems.empty())
    fail("drafter {} is not compatible with target {} ({} problem(s) listed above)", a.draft_dir, a.dir,
         s.drafter->compat_problems.size());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd =
      app.add_subcommand("inspect", "validate a checkpoint and summarize it (geometry, storage, bytes per token)");
  cmd->add_option("dir", args->dir, "target checkpoint directory, .gguf file or directory holding one")
      ->required()
      ->transform(model_path());
  cmd->add_option("--draft", args->draft_dir,
                  "drafter checkpoint directory, .gguf file or directory holding one (also checks compatibility)")
      ->transform(model_path());
  cmd->add_flag("--json", args->json, "print JSON instead of text");
  cmd->add_flag("--check", args->check,
                "also read every float tensor and fail if any holds NaN or infinity (reads the whole checkpoint; "
                "converts a GGUF file as other commands do)");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace specula::cli
