// `specula logits --model DIR --tokens 2,105,... [--json]`: one prefill of the given ids and the
// softcapped logits of every position (an interface tools rely on). JSON: {"logits": [[...], ...]},
// one row per input position. Text: one line per position with the input id and the argmax.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/kv_type_option.h"
#include "cli/model_path.h"
#include "cli/token_list.h"
#include "specula/kernels/softmax.h"
#include "specula/model/target_model.h"

namespace specula::cli {

namespace {

struct LogitsArgs {
  std::string model;
  std::string tokens;
  bool json = false;
  int threads = 0;
  int64_t prefill_chunk = kDefaultPrefillChunk;
  std::string precision = "exact";
  std::string kv_type = "f32";
};

void run_logits(const LogitsArgs& a) {
  const std::vector<int32_t> ids = parse_token_list(a.tokens);
  TargetOptions opts;
  opts.prefill_chunk = a.prefill_chunk;
  opts.precision = parse_precision(a.precision);
  opts.kv_type = parse_kv_type(a.kv_type);
  opts.packed_cache_dir = default_packed_cache_dir();
  opts.load_threads = a.threads;
  auto model = TargetModel::load(a.model, opts);
  ThreadPool pool(a.threads);
  TargetCache cache = model->new_cache();
  ForwardRequest req;
  req.rows = OutputRows::All;
  const ForwardOutput out = model->forward(cache, ids, req, pool);
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t r = 0; r < out.rows.size(); ++r) {
      const float* row = out.logits_row(r);
      rows.push_back(std::vector<float>(row, row + out.vocab_size));
    }
    const std::string text = nlohmann::json{{"logits", std::move(rows)}}.dump() + "\n";
    std::fputs(text.c_str(), stdout);
  } else {
    for (size_t r = 0; r < out.rows.size(); ++r) {
      const float* row = out.logits_row(r);
      const int64_t best = argmax(row, out.vocab_size);
      std::fputs(fmt::format("position {} token {} -> argmax {} logit {:.6g}\n", r, ids[r], best, row[best]).c_str(),
                 stdout);
    }
  }
  std::fflush(stdout);
}

}  // namespace

void add_logits_command(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand("logits", "prefill token ids and print the logits of every position");
  cmd->add_option("--model", args->model, "target checkpoint directory")->required()->transform(model_path());
  cmd->add_option("--tokens", args->tokens, "comma-separated token ids, e.g. 2,105,2364")->required();
  cmd->add_flag("--json", args->json, "print {\"logits\": [[...], ...]} (one row per position)");
  cmd->add_option("--threads", args->threads, "worker threads (0 = one per hardware thread)")
      ->check(in_range(limits::kThreads));
  cmd->add_option("--prefill-chunk", args->prefill_chunk, "rows per forward step (results do not depend on it)")
      ->check(in_range(limits::kPrefillChunk));
  cmd->add_option("--precision", args->precision,
                  "matmul precision; exact (default) is the numerics-checking mode the goldens are held to, "
                  "fast uses int16 / bf16 activations in the inner products, as `run` does by default; int8 uses int8 "
                  "activations for the quantized matrices but the attention's q/k/v projections")
      ->check(CLI::IsMember({"exact", "fast", "int8"}))
      ->capture_default_str();
  add_kv_type_option(cmd, args->kv_type);
  cmd->callback([args] { run_logits(*args); });
}

}  // namespace specula::cli
