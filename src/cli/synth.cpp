// `specula synth`: writes a synthetic checkpoint (random weights, real layout) and optionally its
// matching "-assistant" drafter; with --tokenizer DIR the checkpoint also carries DIR's tokenizer
// files, so that the text commands work on it end to end.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "specula/io/checkpoint.h"
#include "specula/synth/gguf_export.h"
#include "specula/synth/plan.h"
#include "specula/synth/presets.h"
#include "specula/synth/writer.h"
#include "specula/text/tokenizer.h"
#include "specula/util/error.h"
#include "specula/util/progress.h"

namespace specula::cli {

namespace {

// Gemma 4's vocabulary is 262144; four times that is still a test size, far larger would write
// gigabytes of embedding.
constexpr int64_t kMaxSynthVocab = int64_t{1} << 20;

struct SynthArgs {
  std::string preset;
  std::string out;
  uint64_t seed = 0;
  int bits = 0;  // 0 = not quantized
  int group_size = 64;
  std::string dtype = "bf16";
  std::string naming;
  int64_t vocab = 0;  // 0 = the preset's
  bool with_towers = false;
  std::string drafter_dir;
  std::string tokenizer_dir;
  uint64_t max_shard_bytes = 5'000'000'000ull;
  bool progress = false;
  std::string format = "safetensors";
  std::string quant;  // GGUF matrix type; "" = f32
};

std::string quant_text(const synth::SynthOptions& o) {
  std::string s = o.quant ? fmt::format("{}-bit group {}", o.quant->bits, o.quant->group_size)
                          : std::string(o.dtype == DType::F32 ? "f32" : "bf16");
  return s + fmt::format(", {} naming", synth::naming_name(o.resolved_naming()));
}

void check_tokenizer_fits(const std::string& dir, int64_t vocab) {
  const std::filesystem::path file = std::filesystem::path(dir) / "tokenizer.json";
  if (!std::filesystem::is_regular_file(file)) fail("synth --tokenizer: {} not found", file.string());
  const text::Tokenizer tok = text::Tokenizer::load(file.string());
  // Special tokens at the very end (Gemma 3's <image_soft_token> at 262144) are multimodal
  // placeholders that text never encodes to; every other id needs an embedding row.
  int64_t needed = static_cast<int64_t>(tok.vocab_size());
  while (needed > 0 && tok.is_special(static_cast<int32_t>(needed - 1))) --needed;
  if (needed > vocab) {
    fail("synth --tokenizer: {} uses ids up to {} but the checkpoint's vocab is {} (use --vocab {} or more)",
         file.string(), needed - 1, vocab, needed);
  }
}

// tokenizer.json is required (checked above); the config and the template are copied when present.
void copy_tokenizer_files(const std::string& from, const std::string& to) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    const std::filesystem::path src = std::filesystem::path(from) / name;
    if (!std::filesystem::is_regular_file(src)) continue;
    std::error_code ec;
    std::filesystem::copy_file(src, std::filesystem::path(to) / name, std::filesystem::copy_options::overwrite_existing,
                               ec);
    if (ec) fail("synth --tokenizer: cannot copy {} to {}: {}", src.string(), to, ec.message());
  }
}

// --format gguf: the safetensors checkpoint is written to a scratch directory beside the output,
// loaded (so validated) and converted by `convert`; the GGUF file is the only thing left.
template <typename Convert>
void write_gguf(const synth::CheckpointPlan& plan, const std::string& out, const synth::WriteCheckpointOptions& wo,
                Convert convert) {
  namespace fs = std::filesystem;
  const fs::path scratch = fs::path(out).concat(".safetensors-tmp");
  std::error_code ec;
  fs::remove_all(scratch, ec);
  try {
    synth::write_checkpoint(plan, scratch.string(), wo);
    convert(scratch.string());
  } catch (...) {
    fs::remove_all(scratch, ec);
    throw;
  }
  fs::remove_all(scratch, ec);
}

synth::GgufExportOptions gguf_options(const SynthArgs& a, const std::string& name) {
  synth::GgufExportOptions eo;
  eo.matrices = synth::parse_gguf_matrix_type(a.quant.empty() ? "f32" : a.quant);
  eo.name = name;
  eo.tokenizer_dir = a.tokenizer_dir;
  return eo;
}

void synth_target_gguf(const SynthArgs& a, const synth::CheckpointPlan& target,
                       const synth::WriteCheckpointOptions& wo) {
  const synth::GgufExportOptions eo = gguf_options(a, "specula-synth-" + a.preset);
  write_gguf(target, a.out, wo, [&](const std::string& dir) { synth::write_target_gguf(load_target(dir), a.out, eo); });
  std::printf("wrote %s: preset %s (GGUF, %s matrices, f32 vectors), seed %llu, %s\n", a.out.c_str(), a.preset.c_str(),
              synth::gguf_matrix_type_name(eo.matrices), static_cast<unsigned long long>(a.seed),
              format_bytes(std::filesystem::file_size(a.out)).c_str());
}

// The drafter as llama.cpp's converter writes it: `gemma4-assistant`, without the centroid head.
void synth_drafter_gguf(const SynthArgs& a, const synth::CheckpointPlan& drafter,
                        const synth::WriteCheckpointOptions& wo) {
  const synth::GgufExportOptions eo = gguf_options(a, "specula-synth-" + a.preset + "-assistant");
  write_gguf(drafter, a.drafter_dir, wo,
             [&](const std::string& dir) { synth::write_drafter_gguf(load_drafter(dir), a.drafter_dir, eo); });
  std::printf("wrote %s: gemma4-assistant drafter for %s (GGUF, %s matrices, dense head), %s\n", a.drafter_dir.c_str(),
              a.preset.c_str(), synth::gguf_matrix_type_name(eo.matrices),
              format_bytes(std::filesystem::file_size(a.drafter_dir)).c_str());
}

void run_synth(const SynthArgs& a, bool group_given) {
  if (a.format == "gguf" && a.bits != 0)
    throw CLI::ValidationError("--format",
                               "gguf takes --quant for the tensor type; --bits is for safetensors checkpoints");
  if (a.format != "gguf" && !a.quant.empty())
    throw CLI::ValidationError("--quant", "needs --format gguf (safetensors checkpoints take --bits)");
  if (group_given && a.bits == 0) {
    throw CLI::ValidationError("--group-size", "needs --bits (the group size only applies to quantized weights)");
  }
  synth::SynthOptions o;
  o.preset = a.preset;
  o.seed = a.seed;
  o.dtype = a.dtype == "f32" || a.format == "gguf" ? DType::F32 : DType::BF16;
  if (a.bits != 0) o.quant = QuantSpec{a.bits, a.group_size, "affine"};
  if (!a.naming.empty()) o.naming = a.naming == "hf" ? synth::Naming::Hf : synth::Naming::Mlx;
  if (a.vocab != 0) o.vocab = a.vocab;
  o.with_towers = a.with_towers;
  synth::validate_options(o);

  // Plan both before writing either, so a drafter that cannot exist (vocab not a multiple of its
  // centroids) fails before gigabytes are written.
  const synth::CheckpointPlan target = synth::plan_target(o);
  std::unique_ptr<synth::CheckpointPlan> drafter;
  if (!a.drafter_dir.empty()) drafter = std::make_unique<synth::CheckpointPlan>(synth::plan_drafter(o));

  synth::WriteCheckpointOptions wo;
  wo.max_shard_bytes = a.max_shard_bytes;
  wo.progress = true;  // drawn only on a terminal
  wo.force_progress = a.progress;
  wo.progress_label = "target";
  // Checked before writing: every id the tokenizer can produce must have an embedding row.
  if (!a.tokenizer_dir.empty()) check_tokenizer_fits(a.tokenizer_dir, target.config.value("vocab_size", int64_t{0}));
  if (a.format == "gguf") {
    synth_target_gguf(a, target, wo);
  } else {
    const synth::WrittenCheckpoint t = synth::write_checkpoint(target, a.out, wo);
    if (!a.tokenizer_dir.empty()) copy_tokenizer_files(a.tokenizer_dir, a.out);
    std::printf("wrote %s: preset %s (%s), seed %llu, %zu tensors, %s in %zu file(s)\n", a.out.c_str(),
                a.preset.c_str(), quant_text(o).c_str(), static_cast<unsigned long long>(a.seed), t.tensor_count,
                format_bytes(t.tensor_bytes).c_str(), t.weight_files.size());
  }
  if (drafter && a.format == "gguf") {
    wo.progress_label = "drafter";
    synth_drafter_gguf(a, *drafter, wo);
  } else if (drafter) {
    wo.progress_label = "drafter";
    const synth::WrittenCheckpoint d = synth::write_checkpoint(*drafter, a.drafter_dir, wo);
    std::printf("wrote %s: %s drafter for %s (bf16, %s head), %zu tensors, %s in %zu file(s)\n", a.drafter_dir.c_str(),
                drafter->config.value("model_type", std::string("?")).c_str(), a.preset.c_str(),
                drafter->config.value("use_ordered_embeddings", false) ? "centroid" : "dense", d.tensor_count,
                format_bytes(d.tensor_bytes).c_str(), d.weight_files.size());
  }
  std::fflush(stdout);
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  CLI::App* cmd = app.add_subcommand("synth", "write a synthetic checkpoint (random weights, real Gemma 4 layout)");
  const auto names = synth::preset_names();
  cmd->add_option("--preset", args->preset, fmt::format("model geometry: {}", fmt::join(names, ", ")))
      ->required()
      ->check(CLI::IsMember(names));
  cmd->add_option("--out", args->out, "output directory (created; earlier model*.safetensors in it are replaced)")
      ->required();
  cmd->add_option("--seed", args->seed, "random seed (same seed, same bytes)")->capture_default_str();
  cmd->add_option("--bits", args->bits, "MLX affine quantization bits (2, 3, 4, 5, 6, 8); default: unquantized")
      ->check(CLI::IsMember({2, 3, 4, 5, 6, 8}));
  CLI::Option* group = cmd->add_option("--group-size", args->group_size, "quantization group size (32, 64, 128)")
                           ->check(CLI::IsMember({32, 64, 128}))
                           ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "dense weight dtype (and of scales/biases when quantized)")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  cmd->add_option("--naming", args->naming,
                  "tensor naming: hf (model.language_model.*, fused experts) or mlx (language_model.model.*, "
                  "switch_glu experts); default mlx when quantized, else hf")
      ->check(CLI::IsMember({"hf", "mlx"}));
  cmd->add_option("--vocab", args->vocab, "vocabulary size (default: the preset's)")
      ->check(in_range(limits::IntRange{1, kMaxSynthVocab}));
  cmd->add_option("--tokenizer", args->tokenizer_dir,
                  "copy tokenizer.json, tokenizer_config.json and chat_template.jinja from this directory "
                  "(with --format gguf: write them as the file's tokenizer metadata); the vocab must cover the "
                  "tokenizer: --vocab 262144 for Gemma 4's");
  cmd->add_flag("--with-towers", args->with_towers,
                "also write the vision / audio tower tensors with their real names (multimodal checkpoints; text "
                "generation never reads them)");
  cmd->add_option("--drafter", args->drafter_dir,
                  "also write the matching -assistant drafter (bf16) here; with --format gguf: as a "
                  "gemma4-assistant .gguf file (dense head, matrices in --quant)");
  cmd->add_option("--max-shard-bytes", args->max_shard_bytes,
                  "split the weights into model-0000N-of-0000M.safetensors shards above this size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--format", args->format,
                  "checkpoint format: safetensors (a directory) or gguf (--out is the .gguf file)")
      ->check(CLI::IsMember({"safetensors", "gguf"}))
      ->capture_default_str();
  cmd->add_option("--quant", args->quant,
                  "GGUF matrix type: f32 (default), bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m or "
                  "q5_k_m (llama.cpp's mixtures of Q4_K or Q5_K with Q6_K; docs/gguf.md). Vectors stay f32; rows too "
                  "short for the type's "
                  "block stay f32")
      ->check(CLI::IsMember(
          {"f32", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"}));
  cmd->add_flag("--progress", args->progress, "draw the progress bar even when stderr is not a terminal");
  cmd->callback([args, group] { run_synth(*args, group->count() > 0); });
}

}  // namespace specula::cli
