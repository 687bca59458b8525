// `specula run --model DIR (--tokens IDS | --prompt TEXT [--chat [--system TEXT]]) --max-tokens N
// [--ignore-eos] [--json] [--threads T] [--prefill-chunk C] [speculative and sampling options]`:
// one generation (cli/run_speculative.h; plain decoding without a draft source).
// Token ids: the ids on stdout (JSON: {"tokens": [...], "stats": {...}}); text (text_prompt.h): the
// text streams to stdout as it is generated (JSON adds "text"). A stats line goes to stderr.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/constraint_options.h"
#include "cli/flag_checks.h"
#include "cli/kv_type_option.h"
#include "cli/model_path.h"
#include "cli/run_speculative.h"
#include "cli/text_prompt.h"
#include "cli/token_list.h"
#include "specula/io/weight_files.h"
#include "specula/model/target_model.h"

namespace specula::cli {

namespace {

struct RunArgs {
  std::string model;
  std::string tokens;
  int64_t max_tokens = 128;
  bool ignore_eos = false;
  bool json = false;
  int threads = 0;
  int64_t prefill_chunk = kDefaultPrefillChunk;
  int64_t max_context = 0;
  std::string precision = "fast";
  std::string kv_type = "f32";
};

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto spec = std::make_shared<SpeculativeRunArgs>();
  auto text_args = std::make_shared<TextPromptArgs>();
  CLI::App* cmd = app.add_subcommand("run", "generation from a text prompt or token ids");
  cmd->add_option("--model", args->model, "target checkpoint directory")->required()->transform(model_path());
  CLI::Option* tokens =
      cmd->add_option("--tokens", args->tokens, "prompt as comma-separated token ids (starting with BOS 2)");
  add_text_prompt_options(cmd, *text_args);
  tokens->excludes(text_args->prompt_option);
  cmd->add_option("--max-tokens", args->max_tokens, "maximum number of generated tokens")
      ->check(in_range(limits::kMaxTokens))
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at the EOS ids");
  CLI::Option* json = cmd->add_flag("--json", args->json, "print {\"tokens\": [...], \"stats\": {...}}");
  cmd->add_option("--threads", args->threads, "worker threads (0 = one per hardware thread)")
      ->check(in_range(limits::kThreads));
  cmd->add_option("--prefill-chunk", args->prefill_chunk, "rows per prefill forward step")
      ->check(in_range(limits::kPrefillChunk));
  cmd->add_option("--max-context,--ctx", args->max_context,
                  "context limit in tokens (0 = the model's max_position_embeddings)")
      ->check(in_range(limits::kContext));
  cmd->add_option("--precision", args->precision,
                  "matmul precision: fast (int16 / bf16 activations in the inner products where the CPU has VNNI / "
                  "AVX512-BF16), exact (f32) or int8 (as fast, int8 activations for the quantized matrices but the "
                  "attention's q/k/v projections: cheaper multi-row verifies and prefill, far larger rounding error)")
      ->check(CLI::IsMember({"exact", "fast", "int8"}))
      ->capture_default_str();
  add_kv_type_option(cmd, args->kv_type);
  add_speculative_options(cmd, *spec);
  cmd->get_option("--trace")->needs(json);
  auto constraint = std::make_shared<ConstraintArgs>();
  add_constraint_options(cmd, *constraint);
  cmd->callback([args, spec, text_args, tokens, constraint] {
    warn_if_threads_above_cores("--threads", args->threads);
    check_context_flag("--max-context", args->max_context, args->model);
    const bool text_mode = text_prompt_requested(*text_args);
    if (!text_mode && tokens->count() == 0) throw CLI::RequiredError("--tokens or --prompt");
    if (text_mode && text_args->prompt_option->count() == 0) {
      throw CLI::ValidationError("--chat/--system", "need --prompt TEXT");
    }
    std::unique_ptr<TextOutput> text;
    std::vector<int32_t> prompt;
    std::vector<int32_t> eos_ids;
    if (text_mode) {
      text::Tokenizer tokenizer = load_model_tokenizer(args->model);
      prompt = encode_text_prompt(tokenizer, args->model, *text_args);
      eos_ids = text_eos_ids(tokenizer, args->model);
      text = std::make_unique<TextOutput>(std::move(tokenizer), /*stream=*/!args->json);
    } else {
      prompt = parse_token_list(args->tokens);
    }
    // Plain decoding is the gamma 0 case of the speculative session: one path for every run.
    {
      RunBasics b;
      b.model = args->model;
      b.tokens = args->tokens;
      b.max_tokens = args->max_tokens;
      b.ignore_eos = args->ignore_eos;
      b.json = args->json;
      b.threads = args->threads;
      b.prefill_chunk = args->prefill_chunk;
      b.max_context = args->max_context;
      b.precision = args->precision;
      b.kv_type = args->kv_type;
      b.prompt_ids = prompt;
      if (constraint->requested()) b.constraint = load_constraint(*constraint, args->model);
      b.tokenizer_eos_ids = eos_ids;
      run_speculative(b, *spec, text.get());
    }
  });
}

}  // namespace specula::cli
