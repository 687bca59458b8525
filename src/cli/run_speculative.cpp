#include "cli/run_speculative.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/flag_checks.h"
#include "cli/model_path.h"
#include "cli/token_list.h"
#include "specula/engine/eos_tokens.h"
#include "specula/model/drafter.h"
#include "specula/model/gguf_image_cache.h"
#include "specula/model/packed_cache.h"
#include "specula/model/target_model.h"
#include "specula/sample/rng.h"
#include "specula/speculative/acceptance_check.h"
#include "specula/speculative/speculative.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"

namespace specula::cli {

void add_speculative_options(CLI::App* cmd, SpeculativeRunArgs& a) {
  cmd->add_option("--draft", a.draft, "speculative decoding: a drafter checkpoint directory or .gguf file, or 'lookup'")
      ->transform(model_path());
  cmd->add_option("--gamma", a.gamma, "drafts per round: N, or 'auto' (default) to choose each round")
      ->check(gamma_value());
  cmd->add_option("--drafter-compat", a.drafter_compat,
                  "drafter semantics: 'ollama' (default, scale 1, constant position) or 'mlx-bun'")
      ->check(CLI::IsMember({"ollama", "mlx-bun"}));
  cmd->add_option("--draft-quant", a.draft_quant,
                  "drafter weights: 'auto' (default: 4-bit copies of a dense-head drafter's 16-bit matrices in fast "
                  "and int8 precision), 'none' (as stored), 'q4' or 'q8' (copies of every 16/32-bit matrix)")
      ->check(CLI::IsMember({"auto", "none", "q4", "q8"}));
  cmd->add_option("--draft-head", a.draft_head,
                  "drafter head of a dense-head drafter: 'stored' (default: every vocabulary row each step) or "
                  "'clusters' (2048 clusters built at load; a step scores the tokens of the best 32)")
      ->check(CLI::IsMember({"stored", "clusters"}));
  cmd->add_option("--temperature", a.temperature, "sampling temperature (0 or absent = greedy)")
      ->check(in_range(limits::kTemperature));
  cmd->add_option("--top-k", a.top_k, "keep the k most likely tokens (0 = off)")->check(in_range(limits::kTopK));
  cmd->add_option("--top-p", a.top_p, "nucleus sampling mass (1 = off)")->check(in_range(limits::kTopP));
  cmd->add_option("--min-p", a.min_p, "drop tokens below min_p * the top probability (0 = off)")
      ->check(in_range(limits::kMinP));
  cmd->add_option("--seed", a.seed, "sampling seed (default: a random one, reported in the statistics)");
  cmd->add_flag("--trace", a.trace, "with --json: list every verify round {drafts, accepted, draft_ms, verify_ms}");
}

namespace {

// After the load time: " (GGUF image: cache hit; packed weights: cache hit)", each part only
// where it applies (a GGUF checkpoint; fast precision).
std::string load_note(const TargetModel& model) {
  std::vector<std::string> parts;
  if (const GgufImageSource image = model.checkpoint().gguf_image; image != GgufImageSource::None)
    parts.push_back(fmt::format("GGUF image: {}", gguf_image_source_name(image)));
  if (model.packed_source() != PackedSource::None)
    parts.push_back(fmt::format("packed weights: {}", packed_source_name(model.packed_source())));
  return parts.empty() ? std::string() : fmt::format(" ({})", fmt::join(parts, "; "));
}

}  // namespace

void run_speculative(const RunBasics& b, const SpeculativeRunArgs& a, TextOutput* text) {
  const std::vector<int32_t> prompt = b.prompt_ids ? *b.prompt_ids : parse_token_list(b.tokens);
  SpeculativeOptions so;
  so.max_tokens = b.max_tokens;
  so.ignore_eos = b.ignore_eos;
  so.trace = a.trace;
  so.constraint = b.constraint;
  so.sampling.temperature = a.temperature.value_or(0.0);
  if (a.top_k) so.sampling.top_k = *a.top_k;
  if (a.top_p) so.sampling.top_p = *a.top_p;
  if (a.min_p) so.sampling.min_p = *a.min_p;
  so.sampling.seed = a.seed ? *a.seed : fresh_seed();
  validate(so.sampling);
  const bool has_draft = !a.draft.empty();
  so.method = a.draft == "lookup" ? DraftMethod::Lookup : DraftMethod::Drafter;
  so.gamma = parse_gamma_choice(a.gamma);
  if (!has_draft) {  // plain decoding (sampling) through the same loop: rounds without drafts
    so.method = DraftMethod::Lookup;
    so.gamma = GammaChoice{};
    so.gamma.fixed = 0;
  }

  TargetOptions opts;
  opts.prefill_chunk = b.prefill_chunk;
  opts.max_context = b.max_context;
  opts.precision = parse_precision(b.precision);
  opts.kv_type = parse_kv_type(b.kv_type);
  opts.packed_cache_dir = default_packed_cache_dir();
  opts.load_threads = b.threads;
  const int64_t needed = so.gamma.automatic ? so.gamma.max_gamma : so.gamma.fixed;
  opts.rollback_reserve = std::max<int64_t>(opts.rollback_reserve, needed);
  const auto t0 = std::chrono::steady_clock::now();
  auto model = load_target_with_eos(b.model, opts, b.tokenizer_eos_ids);
  std::unique_ptr<Drafter> drafter;
  if (has_draft && so.method == DraftMethod::Drafter)
    drafter = Drafter::load(a.draft, *model, parse_drafter_convention(a.drafter_compat),
                            parse_drafter_quant(a.draft_quant), parse_drafter_head(a.draft_head));
  const double load_ms = ms_since(t0);
  ThreadPool pool(b.threads);
  TargetCache cache = model->new_cache();
  std::function<bool(int32_t)> on_token;
  if (text != nullptr)
    on_token = [text](int32_t id) {
      text->push(id);
      return true;
    };
  const SpeculativeResult res = generate_speculative(*model, cache, drafter.get(), prompt, so, pool, on_token);
  const SpeculativeStats& s = res.stats;

  if (b.json) {
    nlohmann::json hist = nlohmann::json::object();
    for (const auto& [g, n] : s.gamma_histogram) hist[std::to_string(g)] = n;
    nlohmann::json stats = {{"prompt_tokens", s.prompt_tokens},
                            {"generated_tokens", s.generated_tokens},
                            {"prefill_ms", s.prefill_ms},
                            {"decode_ms", s.decode_ms},
                            {"draft_ms", s.draft_ms},
                            {"verify_ms", s.verify_ms},
                            {"prefill_tok_per_s", s.prefill_ms > 0 ? s.prompt_tokens * 1000.0 / s.prefill_ms : 0.0},
                            {"decode_tok_per_s", s.decode_tok_per_s()},
                            {"load_ms", load_ms},
                            {"packed_weights", packed_source_name(model->packed_source())},
                            {"gguf_image", gguf_image_source_name(model->checkpoint().gguf_image)},
                            {"stop_reason", res.stop_reason},
                            {"threads", pool.size()},
                            {"draft", has_draft ? a.draft : std::string("none")},
                            {"drafter_compat", a.drafter_compat},
                            {"draft_quant", a.draft_quant},
                            {"draft_head", a.draft_head},
                            {"temperature", so.sampling.temperature},
                            {"seed", so.sampling.seed},
                            {"drafted", s.drafted},
                            {"accepted", s.accepted},
                            {"target_calls", s.target_calls},
                            {"rounds", s.rounds},
                            {"acceptance_rate", s.acceptance_rate()},
                            {"mean_accepted_length", s.mean_accepted_length()},
                            {"gamma_histogram", hist}};
    nlohmann::json doc = {{"tokens", res.tokens}, {"stats", stats}};
    if (text != nullptr) doc["text"] = text->finish();
    if (a.trace) {
      nlohmann::json rounds = nlohmann::json::array();
      for (const auto& r : res.rounds)
        rounds.push_back(
            {{"drafts", r.drafts}, {"accepted", r.accepted}, {"draft_ms", r.draft_ms}, {"verify_ms", r.verify_ms}});
      doc["rounds"] = rounds;
    }
    const std::string out = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fputs(out.c_str(), stdout);
  } else {
    print_run_output(res.tokens, text);
    const std::string copies = drafter != nullptr ? drafter_built_note(*drafter) : std::string();
    std::fputs(fmt::format("load {:.1f} ms{}{} | prefill {} tokens, {:.1f} tok/s | decode {} tokens, {:.2f} tok/s | "
                           "drafted {}, accepted {} ({:.1f}%), target calls {} | stop: {} | {} threads{}\n",
                           load_ms, load_note(*model), copies.empty() ? "" : " (drafter: " + copies + ")",
                           s.prompt_tokens, s.prefill_ms > 0 ? s.prompt_tokens * 1000.0 / s.prefill_ms : 0.0,
                           s.generated_tokens, s.decode_tok_per_s(), s.drafted, s.accepted, 100.0 * s.acceptance_rate(),
                           s.target_calls, res.stop_reason, pool.size(),
                           so.sampling.greedy() ? std::string() : fmt::format(" | seed {}", so.sampling.seed))
                   .c_str(),
               stderr);
  }
  std::fflush(stdout);
  if (drafter != nullptr) {
    if (const std::string warning = no_acceptance_warning(s.drafted, s.accepted, a.draft); !warning.empty())
      std::fputs((warning + "\n").c_str(), stderr);
  }
}

}  // namespace specula::cli
