// `specula chat --model DIR [--draft DIR|lookup] [--gamma N|auto] [--system TEXT] [--max-tokens N]
// [sampling flags] [--threads N] [--precision exact|fast|int8] [--kv-type f32|bf16] [--chat-template FILE] [--ctx N]
// [--no-line-editing]`:
// an interactive multi-turn chat on stdin/stdout (a terminal, where lines are edited with libedit
// and earlier ones recalled with Up: cli/line_reader.h; or a pipe). Each turn renders the
// whole conversation through the chat template; the engine's prompt cache keeps the KV cache
// between turns, so only the new turn is prefilled. Answers stream to stdout, a statistics line
// per answer goes to stderr. Ctrl-C while answering stops the answer (the partial answer stays in
// the conversation); Ctrl-C at the prompt, Ctrl-D or /exit ends the chat (exit 0).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/interrupt.h"
#include "cli/kv_type_option.h"
#include "cli/line_reader.h"
#include "cli/model_path.h"
#include "specula/engine/engine.h"
#include "specula/model/packed_cache.h"
#include "specula/sample/rng.h"
#include "specula/speculative/acceptance_check.h"
#include "specula/util/error.h"

namespace specula::cli {

namespace {

struct ChatArgs {
  std::string model;
  std::string draft;
  std::string gamma = "auto";
  std::string drafter_compat = "ollama";
  std::string draft_quant = "auto";
  std::string draft_head = "stored";
  std::string system;
  std::string chat_template;
  std::string precision = "fast";
  std::string kv_type = "f32";
  int64_t max_tokens = 1024;
  int threads = 0;
  int64_t ctx = 0;
  int64_t prefill_chunk = kDefaultPrefillChunk;
  SamplingOverrides sampling;
  bool line_editing = true;
};

void write_out(const std::string& s) {
  if (s.empty()) return;
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

void write_err(const std::string& s) {
  std::fputs(s.c_str(), stderr);
  std::fflush(stderr);
}

std::string stats_line(const GenerationResult& r, bool speculative) {
  const GenerationStats& s = r.stats;
  std::string line =
      fmt::format("[{} tokens, prefilled {} of {} ({} cached), {:.1f} tok/s", s.completion_tokens,
                  s.prompt_tokens - s.cached_tokens, s.prompt_tokens, s.cached_tokens, s.decode_tok_per_s());
  if (speculative)
    line += fmt::format(", acceptance {:.0f}% (drafted {}, accepted {})", 100.0 * s.acceptance_rate(), s.drafted,
                        s.accepted);
  if (r.finish_reason == "cancelled") line += ", interrupted";
  if (r.finish_reason == "length") line += ", length limit";
  return line + "]\n";
}

const char* kHelp =
    "Type a message and press Enter. Commands:\n"
    "  /reset  start a new conversation\n"
    "  /help   this text\n"
    "  /exit   leave (also Ctrl-D, or Ctrl-C at the prompt)\n"
    "Start a message with // to send it with one leading /.\n"
    "Ctrl-C while the model answers stops the answer and keeps the conversation.\n";

// The command a line names: its first word when that is '/' and letters only ("/foo", "/foo bar"),
// else empty. A path such as "/usr/bin ..." stays a message.
std::string command_word(const std::string& line) {
  if (line.size() < 2 || line[0] != '/') return "";
  const size_t end = std::min(line.find_first_of(" \t"), line.size());
  for (size_t i = 1; i < end; ++i)
    if (!std::isalpha(static_cast<unsigned char>(line[i]))) return "";
  return end > 1 ? line.substr(0, end) : "";
}

int run_chat(const ChatArgs& a) {
  EngineOptions eo;
  eo.model_dir = a.model;
  eo.draft = a.draft;
  eo.drafter_compat = a.drafter_compat;
  eo.draft_quant = a.draft_quant;
  eo.draft_head = a.draft_head;
  eo.gamma = a.gamma;
  eo.chat_template_file = a.chat_template;
  eo.threads = a.threads;
  eo.max_context = a.ctx;
  eo.prefill_chunk = a.prefill_chunk;
  eo.precision = parse_precision(a.precision);
  eo.kv_type = parse_kv_type(a.kv_type);
  eo.packed_cache_dir = default_packed_cache_dir();
  block_sigint_in_new_threads();
  std::unique_ptr<Engine> engine = Engine::load(eo, [](const std::string& line) { write_err(line + "\n"); });
  unblock_sigint();  // a Ctrl-C pressed while loading ends the program here (default action)
  if (engine->tokenizer() == nullptr)
    fail("{}/tokenizer.json not found: chat needs the checkpoint's tokenizer", a.model);
  if (engine->chat_template() == nullptr)
    fail(
        "{} has no chat template (chat_template.jinja or tokenizer_config.json's chat_template); give one with "
        "--chat-template FILE",
        a.model);
  SamplingParams sampling = apply_overrides(engine->default_sampling(), a.sampling);
  // Without --seed each chat draws its own seed; with it, turn i uses seed + i (reproducible).
  const bool seeded = a.sampling.seed.has_value();
  const uint64_t seed0 = seeded ? *a.sampling.seed : fresh_seed();
  const bool speculative = !a.draft.empty();

  install_sigint_flag();
  const bool interactive = isatty(STDIN_FILENO) != 0;
  const std::unique_ptr<LineReader> reader = make_line_reader(a.line_editing, "> ");
  write_err(fmt::format(
      "specula chat: {} (draft: {}, {}). /help for commands, Ctrl-D to exit.\n", engine->model_name(),
      engine->draft_description(),
      sampling.greedy() ? std::string("greedy") : fmt::format("temperature {}, seed {}", sampling.temperature, seed0)));

  auto fresh_conversation = [&] {
    nlohmann::ordered_json m = nlohmann::ordered_json::array();
    if (!a.system.empty()) m.push_back({{"role", "system"}, {"content", a.system}});
    return m;
  };
  nlohmann::ordered_json messages = fresh_conversation();
  uint64_t turn = 0;
  NoAcceptanceWatch acceptance_watch;  // over the whole chat
  std::string line;
  for (;;) {
    clear_sigint();  // before the prompt appears: a Ctrl-C typed once it shows must count
    if (reader->read(line) != LineStatus::Line) {
      if (interactive) write_out("\n");
      return 0;  // Ctrl-D / end of input, or Ctrl-C at the prompt
    }
    if (line.empty()) continue;
    const std::string command = command_word(line);
    if (command == "/exit" || command == "/quit") return 0;
    if (command == "/help") {
      write_out(kHelp);
      continue;
    }
    if (command == "/reset") {
      messages = fresh_conversation();
      write_err("(new conversation)\n");
      continue;
    }
    // A mistyped command must not reach the model as a message.
    if (!command.empty()) {
      write_err(fmt::format("error: unknown command {}; commands: /reset, /help, /exit (// starts a message with /)\n",
                            command));
      continue;
    }
    if (line.rfind("//", 0) == 0) line.erase(0, 1);

    messages.push_back({{"role", "user"}, {"content", line}});
    GenerationRequest req;
    req.max_tokens = a.max_tokens;
    req.sampling = sampling;
    req.sampling.seed = seed0 + turn++;
    GenerationResult result;
    try {
      req.prompt = engine->encode_chat(messages);
      result = engine->generate(req, [](const GenerationEvent& ev) {
        write_out(ev.text);
        return !sigint_received();
      });
    } catch (const Error& e) {
      messages.erase(messages.size() - 1);  // the turn did not happen
      write_err(fmt::format("\nerror: {}\n", e.what()));
      continue;
    }
    if (result.text.empty() || result.text.back() != '\n') write_out("\n");
    messages.push_back({{"role", "assistant"}, {"content", result.text}});
    write_err(stats_line(result, speculative));
    if (a.draft != "lookup") {
      const std::string warning = acceptance_watch.add(result.stats.drafted, result.stats.accepted, a.draft);
      if (!warning.empty()) write_err(warning + "\n");
    }
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "interactive multi-turn chat (keeps the KV cache between turns)");
  cmd->add_option("--model", args->model, "target checkpoint directory (with tokenizer.json and a chat template)")
      ->required()
      ->transform(model_path());
  cmd->add_option("--draft", args->draft,
                  "speculative decoding: a drafter checkpoint directory or .gguf file, or 'lookup'")
      ->transform(model_path());
  cmd->add_option("--gamma", args->gamma, "drafts per round: N, or 'auto' (default)")->check(gamma_value());
  cmd->add_option("--drafter-compat", args->drafter_compat, "drafter semantics: 'ollama' (default) or 'mlx-bun'")
      ->check(CLI::IsMember({"ollama", "mlx-bun"}));
  cmd->add_option("--draft-quant", args->draft_quant,
                  "drafter weights: 'auto' (default), 'none' (as stored), 'q4' or 'q8' (affine copies made at load)")
      ->check(CLI::IsMember({"auto", "none", "q4", "q8"}));
  cmd->add_option("--draft-head", args->draft_head,
                  "drafter head of a dense-head drafter: 'stored' (default) or 'clusters' (built at load)")
      ->check(CLI::IsMember({"stored", "clusters"}));
  cmd->add_option("--system", args->system, "system message at the start of the conversation");
  cmd->add_option("--max-tokens", args->max_tokens, "longest answer in tokens")
      ->check(in_range(limits::kMaxTokens))
      ->capture_default_str();
  auto& s = args->sampling;
  cmd->add_option("--temperature", s.temperature, "sampling temperature (0 = greedy; default: generation_config.json)")
      ->check(in_range(limits::kTemperature));
  cmd->add_option("--top-k", s.top_k, "keep the k most likely tokens (0 = off)")->check(in_range(limits::kTopK));
  cmd->add_option("--top-p", s.top_p, "nucleus sampling mass (1 = off)")->check(in_range(limits::kTopP));
  cmd->add_option("--min-p", s.min_p, "drop tokens below min_p * the top probability (0 = off)")
      ->check(in_range(limits::kMinP));
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "HF repetition penalty (1 = off)")
      ->check(in_range(limits::kRepetitionPenalty));
  cmd->add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty (0 = off)")
      ->check(in_range(limits::kPresencePenalty));
  cmd->add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty (0 = off)")
      ->check(in_range(limits::kFrequencyPenalty));
  cmd->add_option("--seed", s.seed, "sampling seed (turn i uses seed + i; default: random)");
  cmd->add_option("--threads", args->threads, "worker threads (0 = one per hardware thread)")
      ->check(in_range(limits::kThreads));
  cmd->add_option("--precision", args->precision, "matmul precision: 'fast' (default), 'exact' or 'int8'")
      ->check(CLI::IsMember({"exact", "fast", "int8"}));
  add_kv_type_option(cmd, args->kv_type);
  cmd->add_option("--chat-template", args->chat_template, "a Jinja chat template file replacing the checkpoint's");
  cmd->add_option("--ctx", args->ctx, "context limit in tokens (0 = the model's max_position_embeddings)")
      ->check(in_range(limits::kContext));
  cmd->add_option("--prefill-chunk", args->prefill_chunk, "rows per prefill forward step")
      ->check(in_range(limits::kPrefillChunk));
  cmd->add_flag("!--no-line-editing", args->line_editing,
                "on a terminal, read lines as typed: no cursor keys or history (libedit)");
  cmd->callback([args] {
    warn_if_threads_above_cores("--threads", args->threads);
    check_context_flag("--ctx", args->ctx, args->model);
    const int code = run_chat(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace specula::cli
