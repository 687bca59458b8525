#pragma once
// The public API: load a target model (+ drafter or prompt lookup), its tokenizer and chat
// template once, then run generations — any number at once — with streaming callbacks,
// cancellation, statistics and a prompt cache.
//
// Generations run through the continuous-batching scheduler (engine/scheduler.h): up to
// `parallel` of them share every target forward, the rest wait for a slot. Each one's tokens are
// the bytes it would get alone: the kernels are batch invariant (docs/architecture.md).
//
// Prompt cache, per slot: a new generation keeps the longest common prefix of a free slot's
// cached tokens and its prompt and prefills only the remainder; at least the last prompt token is
// always fed, so the first generated token comes from a fresh forward. Output is the same bytes
// as a cold run.
//
// Thread safety: generate() may be called from many threads at once (each call blocks until its
// generation ends; its callback runs on the scheduler's thread). The const text helpers (encode,
// decode, render) may run concurrently with everything.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/kernels/kv_type.h"
#include "specula/kernels/matmul.h"
#include "specula/sample/sampling_params.h"
#include "specula/speculative/speculative.h"

namespace specula {

class ChatTemplate;
class Drafter;
class Scheduler;
class TargetModel;
class TargetCache;
class ThreadPool;
namespace text {
class Tokenizer;
}

struct EngineOptions {
  std::string model_dir;
  std::string draft;                      // drafter checkpoint dir, "lookup", or "" (plain decoding)
  std::string drafter_compat = "ollama";  // ollama | mlx-bun (model/drafter.h)
  std::string draft_quant = "auto";       // auto | none | q4 | q8 (model/drafter.h)
  std::string draft_head = "stored";      // stored | clusters (model/drafter.h)
  std::string gamma = "auto";             // default draft length: N or "auto"
  std::string chat_template_file;         // overrides the checkpoint's chat template
  int threads = 0;                        // 0 = hardware concurrency
  int64_t max_context = 0;                // 0 = the model's max_position_embeddings
  int64_t prefill_chunk = kDefaultPrefillChunk;
  Precision precision = Precision::Fast;
  KvType kv_type = KvType::F32;
  bool prompt_cache = true;
  int parallel = 1;              // generations decoding at once (KV slots)
  int64_t step_rows = 0;         // row budget of a batched step while sequences decode; 0 = 32
  int64_t kv_budget_mb = 0;      // KV memory of all slots (engine/scheduler.h); 0 = no limit
  std::string packed_cache_dir;  // TargetOptions::packed_cache_dir ("" = no cache file)
};

// A progress line while loading ("loading target 3/7 ...").
using LoadProgress = std::function<void(const std::string& line)>;

struct TokenLogprob {
  int32_t id = 0;
  std::string text;      // the token's own text (special tokens as written)
  double logprob = 0.0;  // log-softmax of the model's (softcapped) logits, before sampling filters
};

struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the top_logprobs most likely tokens, most likely first
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included (encode_* below)
  int64_t max_tokens = 256;
  bool ignore_eos = false;
  SamplingParams sampling;        // resolved (engine.default_sampling() + overrides)
  std::vector<std::string> stop;  // stop strings (matched on the text, held back)
  bool speculative = true;        // false: plain decoding even when a draft source is loaded
  // Default: the engine's. Seeded sampling reproduces with any gamma ("auto" with sampling chooses
  // from acceptance alone, speculative/gamma_choice.h).
  std::optional<GammaChoice> gamma;
  int top_logprobs = -1;            // -1: no logprobs; 0..20: the chosen token's + that many
  bool skip_special_tokens = true;  // in the streamed text
  // Constrained output (grammar/): a JSON Schema or GBNF grammar, compiled; null for none. Needs
  // the tokenizer. The output is always a prefix of the grammar's language, complete unless the
  // token budget or the context ended it first.
  std::shared_ptr<const grammar::Grammar> grammar;
};

// One piece of streamed output: the tokens emitted since the last event and the text that became
// final (after UTF-8 completion and stop-string hold-back; may be empty).
struct GenerationEvent {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprobs> logprobs;  // one per token, when requested
};
// Return false to cancel: generation stops within one decode step (finish_reason "cancelled").
using GenerationCallback = std::function<bool(const GenerationEvent& event)>;

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens reused from the prompt cache (not prefilled)
  int64_t completion_tokens = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t target_calls = 0;
  double prefill_ms = 0.0;
  double time_to_first_token_ms = 0.0;
  double decode_ms = 0.0;
  double decode_tok_per_s() const {
    return decode_ms > 0 && completion_tokens > 1 ? (completion_tokens - 1) * 1000.0 / decode_ms : 0.0;
  }
  double acceptance_rate() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0; }
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // every emitted token (the EOS token excluded)
  std::string text;             // the final text (stop string and what follows removed)
  // "stop" (EOS or a stop string), "length" (max_tokens or the context limit), "cancelled".
  std::string finish_reason;
  int stop_index = -1;  // which stop string matched, if any
  std::vector<TokenLogprobs> logprobs;
  GenerationStats stats;
};

class Engine {
 public:
  // Loads everything; throws specula::Error naming the file/field. A checkpoint without a usable
  // tokenizer (no tokenizer.json, and no GGUF tokenizer specula reads) loads for token-id use:
  // tokenizer() is then null and the text helpers throw with no_tokenizer_reason().
  static std::unique_ptr<Engine> load(const EngineOptions& options, const LoadProgress& progress = {});
  ~Engine();

  const EngineOptions& options() const { return options_; }
  const TargetModel& model() const { return *model_; }
  const Drafter* drafter() const { return drafter_.get(); }
  const text::Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const ChatTemplate* chat_template() const { return template_.get(); }
  // Why tokenizer() is null, naming the file (and the GGUF tokenizer model type or key).
  const std::string& no_tokenizer_reason() const { return no_tokenizer_reason_; }
  std::string model_name() const;         // the model directory's last path component
  std::string draft_description() const;  // "none", "lookup" or the drafter's directory name
  int64_t max_context() const;
  int threads() const;
  // The checkpoint's generation_config.json defaults (greedy when it has none).
  const SamplingParams& default_sampling() const { return default_sampling_; }

  // Text helpers (throw specula::Error without a tokenizer / template).
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;
  // The chat template around `messages` (with `tools`, extra variables such as enable_thinking).
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools = nullptr,
                          bool add_generation_prompt = true,
                          const nlohmann::ordered_json& extra_variables = nlohmann::ordered_json::object()) const;
  // render_chat encoded without adding special tokens again (the template writes <bos>).
  std::vector<int32_t> encode_chat(
      const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools = nullptr,
      const nlohmann::ordered_json& extra_variables = nlohmann::ordered_json::object()) const;

  // Runs one generation (see the prompt cache above). Throws specula::Error before any work on
  // an invalid request (empty prompt, prompt + 1 past the context, bad sampling values, token ids
  // out of range). The callback is called at least once per decode step that emitted tokens.
  GenerationResult generate(const GenerationRequest& request, const GenerationCallback& on_event = {});

  // Forgets the prompt cache of every idle slot (the next generation prefills everything).
  void clear_prompt_cache();
  // The most tokens any slot holds for the prompt cache.
  int64_t cached_tokens() const;

  // Load, for metrics: generations holding a slot, waiting for one, and the KV positions the
  // running ones hold over parallel x max_context (0..1).
  int parallel() const;
  int64_t running() const;
  int64_t waiting() const;
  double kv_utilization() const;
  // The token bytes for constrained decoding (grammar/token_trie.h), built on first use.
  std::shared_ptr<const grammar::TokenTrie> token_vocabulary() const;

 private:
  Engine();
  void require_tokenizer(const char* what) const;

  EngineOptions options_;
  std::unique_ptr<TargetModel> model_;
  std::unique_ptr<Drafter> drafter_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  std::string tokenizer_origin_;     // tokenizer.json or the .gguf file
  std::string no_tokenizer_reason_;  // when tokenizer_ is null
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  SamplingParams default_sampling_;
  GammaChoice gamma_;
  mutable std::once_flag token_vocabulary_once_;
  mutable std::shared_ptr<const grammar::TokenTrie> token_vocabulary_;
};

}  // namespace specula
