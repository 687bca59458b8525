// `specula demo [--model DIR --draft DIR|lookup] [--prompt TEXT] [--max-tokens N] [--cache-dir DIR]
// [--tokenizer DIR] [--threads N]`: the quickest look at what specula does. Without --model it
// creates once (cached) a small synthetic Gemma 4 target + "-assistant" drafter pair that carries
// the real Gemma 4 tokenizer, then runs one chat prompt through plain and through speculative
// decoding (greedy), streams both texts, prints a statistics table and checks that both outputs
// are identical (exit 1 if not). Synthetic weights produce meaningless text; the machinery is real.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/kv_type_option.h"
#include "cli/model_path.h"
#include "specula/engine/engine.h"
#include "specula/model/packed_cache.h"
#include "specula/synth/plan.h"
#include "specula/synth/writer.h"
#include "specula/util/error.h"

namespace specula::cli {

namespace {

namespace fs = std::filesystem;

// The demo pair: small enough to create in seconds and decode quickly on two cores, with the
// full 262 144-token vocabulary the Gemma 4 tokenizer needs.
constexpr const char* kDemoPreset = "tiny-dense";
constexpr int64_t kDemoVocab = 262144;
constexpr const char* kDemoName = "tiny-dense-gemma4-v1";  // bump when the pair changes
constexpr const char* kCompleteMarker = "demo.json";       // written last: the pair is complete

struct DemoArgs {
  std::string model;
  std::string draft;
  std::string prompt = "Explain speculative decoding in one paragraph.";
  int64_t max_tokens = 48;
  std::string cache_dir;
  std::string tokenizer_dir;
  std::string kv_type = "f32";
  std::string gamma = "auto";
  int threads = 0;
};

void say(const std::string& s) {
  std::fputs(s.c_str(), stderr);
  std::fflush(stderr);
}

fs::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return fs::path(xdg) / "specula" / "demo";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return fs::path(home) / ".cache" / "specula" / "demo";
  fail("demo: neither XDG_CACHE_HOME nor HOME is set; give a cache directory with --cache-dir DIR");
}

// --tokenizer, else $SPECULA_TOKENIZER_DIR, else the source tree's copy.
fs::path find_tokenizer_dir(const std::string& flag) {
  std::vector<fs::path> tried;
  if (!flag.empty()) {
    if (fs::is_regular_file(fs::path(flag) / "tokenizer.json")) return flag;
    fail("demo --tokenizer: {} not found", (fs::path(flag) / "tokenizer.json").string());
  }
  if (const char* env = std::getenv("SPECULA_TOKENIZER_DIR"); env != nullptr && *env != '\0') {
    if (fs::is_regular_file(fs::path(env) / "tokenizer.json")) return env;
    tried.push_back(env);
  }
#ifdef SPECULA_DEMO_TOKENIZER_DIR
  if (fs::is_regular_file(fs::path(SPECULA_DEMO_TOKENIZER_DIR) / "tokenizer.json")) return SPECULA_DEMO_TOKENIZER_DIR;
  tried.push_back(SPECULA_DEMO_TOKENIZER_DIR);
#endif
  std::string where;
  for (const auto& t : tried) where += (where.empty() ? "" : ", ") + (t / "tokenizer.json").string();
  fail(
      "demo: no Gemma 4 tokenizer found{}; give a directory holding tokenizer.json (and chat_template.jinja) with "
      "--tokenizer DIR or SPECULA_TOKENIZER_DIR",
      where.empty() ? std::string() : " (tried " + where + ")");
}

void copy_tokenizer_files(const fs::path& from, const fs::path& to) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    const fs::path src = from / name;
    if (!fs::is_regular_file(src)) continue;
    std::error_code ec;
    fs::copy_file(src, to / name, fs::copy_options::overwrite_existing, ec);
    if (ec) fail("demo: cannot copy {} to {}: {}", src.string(), to.string(), ec.message());
  }
}

// The cached synthetic pair (created on first use). The pair is written into a temporary
// directory next to its final place and renamed there when complete, so an interrupted run
// leaves no half-written pair behind (only a stale temporary directory, removed next time).
fs::path ensure_demo_pair(const fs::path& cache_dir, const std::string& tokenizer_flag) {
  const fs::path pair = cache_dir / kDemoName;
  if (fs::is_regular_file(pair / kCompleteMarker)) return pair;

  const fs::path tokenizer_dir = find_tokenizer_dir(tokenizer_flag);
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) fail("demo: cannot create the cache directory {}: {}", cache_dir.string(), ec.message());
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {  // leftovers of interrupted runs
    const std::string name = entry.path().filename().string();
    if (name.rfind(std::string(kDemoName) + ".tmp-", 0) == 0) {
      std::error_code ignore;
      fs::remove_all(entry.path(), ignore);
    }
  }
  std::string tmpl = (cache_dir / (std::string(kDemoName) + ".tmp-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) fail("demo: cannot create a directory in {}", cache_dir.string());
  const fs::path tmp = tmpl;

  say(
      fmt::format("creating the demo models once (synthetic {} target + assistant drafter, random weights, "
                  "vocab {}, Gemma 4 tokenizer from {}) in {} ...\n",
                  kDemoPreset, kDemoVocab, tokenizer_dir.string(), pair.string()));
  try {
    synth::SynthOptions o;
    o.preset = kDemoPreset;
    o.vocab = kDemoVocab;
    synth::validate_options(o);
    synth::WriteCheckpointOptions wo;
    wo.progress = true;  // drawn only on a terminal
    wo.progress_label = "target";
    synth::write_checkpoint(synth::plan_target(o), (tmp / "model").string(), wo);
    copy_tokenizer_files(tokenizer_dir, tmp / "model");
    wo.progress_label = "drafter";
    synth::write_checkpoint(synth::plan_drafter(o), (tmp / "drafter").string(), wo);
    nlohmann::json marker = {{"preset", kDemoPreset}, {"vocab", kDemoVocab}, {"tokenizer", tokenizer_dir.string()}};
    std::ofstream(tmp / kCompleteMarker) << marker.dump(2) << "\n";
    if (!fs::is_regular_file(tmp / kCompleteMarker)) fail("demo: cannot write {}", (tmp / kCompleteMarker).string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  if (fs::exists(pair)) fs::remove_all(pair, ec);  // an incomplete pair (no marker) left by other means
  fs::rename(tmp, pair, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    // Another demo finished first: use its pair.
    if (!fs::is_regular_file(pair / kCompleteMarker)) fail("demo: cannot move the demo models to {}", pair.string());
  }
  return pair;
}

struct RunOutcome {
  GenerationResult result;
  double wall_ms = 0.0;
};

RunOutcome run_once(Engine& engine, const std::vector<int32_t>& prompt, int64_t max_tokens, bool speculative) {
  GenerationRequest req;
  req.prompt = prompt;
  req.max_tokens = max_tokens;
  req.sampling = SpeculativeOptions::greedy_sampling();
  req.speculative = speculative;
  engine.clear_prompt_cache();  // both runs prefill the whole prompt: a fair comparison
  RunOutcome out;
  out.result = engine.generate(req, [](const GenerationEvent& ev) {
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputs("\n", stdout);
  return out;
}

void run_demo(const DemoArgs& a) {
  const bool synthetic = a.model.empty();
  if (!synthetic && a.draft.empty()) throw CLI::ValidationError("--model", "needs --draft DIR (or --draft lookup)");
  if (synthetic && !a.draft.empty()) throw CLI::ValidationError("--draft", "needs --model DIR");

  EngineOptions eo;
  if (synthetic) {
    const fs::path pair =
        ensure_demo_pair(a.cache_dir.empty() ? default_cache_dir() : fs::path(a.cache_dir), a.tokenizer_dir);
    eo.model_dir = (pair / "model").string();
    eo.draft = (pair / "drafter").string();
  } else {
    eo.model_dir = a.model;
    eo.draft = a.draft;
  }
  eo.gamma = a.gamma;
  eo.threads = a.threads;
  eo.prompt_cache = false;
  eo.kv_type = parse_kv_type(a.kv_type);
  eo.packed_cache_dir = default_packed_cache_dir();
  std::unique_ptr<Engine> engine = Engine::load(eo, [](const std::string& line) { say(line + "\n"); });
  if (engine->tokenizer() == nullptr) fail("{}/tokenizer.json not found: the demo needs the tokenizer", eo.model_dir);

  std::vector<int32_t> prompt;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", a.prompt}}});
  if (engine->chat_template() != nullptr) {
    prompt = engine->encode_chat(messages);
  } else {
    prompt = engine->encode(a.prompt, /*add_special_tokens=*/true);
  }

  const std::string pair_name = synthetic ? fmt::format("synthetic {} + its assistant drafter", kDemoPreset)
                                          : engine->model_name() + " + " + engine->draft_description();
  std::printf("specula demo: %s, %d threads, greedy, %lld prompt tokens, up to %lld new tokens\n", pair_name.c_str(),
              engine->threads(), static_cast<long long>(prompt.size()), static_cast<long long>(a.max_tokens));
  if (synthetic)
    std::printf(
        "note: these are SYNTHETIC models with random weights: the text below is meaningless noise.\n"
        "      The tokenizer, chat template, decoding and verification are the real machinery.\n");
  std::printf("prompt: %s\n\n--- plain decoding ---\n", a.prompt.c_str());
  std::fflush(stdout);
  const RunOutcome plain = run_once(*engine, prompt, a.max_tokens, /*speculative=*/false);
  std::printf("\n--- speculative decoding (draft: %s) ---\n", engine->draft_description().c_str());
  std::fflush(stdout);
  const RunOutcome spec = run_once(*engine, prompt, a.max_tokens, /*speculative=*/true);

  const GenerationStats& p = plain.result.stats;
  const GenerationStats& s = spec.result.stats;
  const double speedup = p.decode_tok_per_s() > 0 ? s.decode_tok_per_s() / p.decode_tok_per_s() : 0.0;
  std::printf("\n%-12s %7s %10s %10s %12s\n", "", "tokens", "prefill ms", "decode t/s", "acceptance");
  std::printf("%-12s %7lld %10.1f %10.1f %12s\n", "plain", static_cast<long long>(p.completion_tokens), p.prefill_ms,
              p.decode_tok_per_s(), "-");
  std::printf("%-12s %7lld %10.1f %10.1f %11.0f%%   (drafted %lld, accepted %lld, %lld target calls)\n", "speculative",
              static_cast<long long>(s.completion_tokens), s.prefill_ms, s.decode_tok_per_s(),
              100.0 * s.acceptance_rate(), static_cast<long long>(s.drafted), static_cast<long long>(s.accepted),
              static_cast<long long>(s.target_calls));
  std::printf("speedup: %.2fx%s\n", speedup,
              synthetic ? " (a random drafter rarely guesses right; trained pairs accept far more)" : "");
  const bool identical = plain.result.tokens == spec.result.tokens && plain.result.text == spec.result.text;
  std::printf("outputs identical: %s\n", identical ? "yes" : "NO");
  std::fflush(stdout);
  if (!identical)
    fail("speculative decoding produced different tokens than plain decoding ({} vs {} tokens)",
         spec.result.tokens.size(), plain.result.tokens.size());
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "plain vs speculative decoding side by side (creates a small synthetic pair on first use)");
  cmd->add_option("--model", args->model, "a real target checkpoint (default: the cached synthetic demo model)")
      ->transform(model_path());
  cmd->add_option("--draft", args->draft, "with --model: its drafter checkpoint directory or .gguf file, or 'lookup'")
      ->transform(model_path());
  cmd->add_option("--prompt", args->prompt, "the user message")->capture_default_str();
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate")
      ->check(in_range(limits::kMaxTokens))
      ->capture_default_str();
  cmd->add_option("--gamma", args->gamma, "drafts per round: N, or 'auto'")
      ->check(gamma_value())
      ->capture_default_str();
  cmd->add_option("--cache-dir", args->cache_dir,
                  "where the synthetic pair is kept (default: $XDG_CACHE_HOME/specula/demo or ~/.cache/specula/demo)");
  cmd->add_option("--tokenizer", args->tokenizer_dir,
                  "directory with the Gemma 4 tokenizer.json for the synthetic pair (default: $SPECULA_TOKENIZER_DIR, "
                  "else the source tree's tests/data/tokenizer-gemma4)");
  cmd->add_option("--threads", args->threads, "worker threads (0 = one per hardware thread)")
      ->check(in_range(limits::kThreads));
  add_kv_type_option(cmd, args->kv_type);
  cmd->callback([args] {
    warn_if_threads_above_cores("--threads", args->threads);
    run_demo(*args);
  });
}

}  // namespace specula::cli
