#include "specula/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "specula/engine/eos_tokens.h"
#include "specula/engine/logprobs.h"
#include "specula/engine/option_limits.h"
#include "specula/engine/scheduler.h"
#include "specula/engine/text_stream.h"
#include "specula/engine/token_vocabulary.h"
#include "specula/model/checkpoint_text.h"
#include "specula/model/drafter.h"
#include "specula/model/gguf_target.h"
#include "specula/model/target_model.h"
#include "specula/text/chat_template.h"
#include "specula/text/tokenizer.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"
#include "specula/util/thread_pool.h"

namespace specula {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kMaxTopLogprobs = static_cast<int>(limits::kTopLogprobs.hi);

std::string last_component(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" normalizes to "dir/" with an empty filename
  return p.filename().string();
}

std::string finish_reason_of(const std::string& stop_reason, bool stop_string, bool cancelled) {
  if (stop_string) return "stop";
  if (stop_reason == "eos" || stop_reason == "grammar") return "stop";
  if (stop_reason == "max_tokens" || stop_reason == "context") return "length";
  if (cancelled || stop_reason == "callback") return "cancelled";
  return stop_reason;
}

}  // namespace

Engine::Engine() = default;
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::load(const EngineOptions& options, const LoadProgress& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  if (options.model_dir.empty()) fail("engine: no model directory given");
  limits::require_in("engine: prefill chunk", options.prefill_chunk, limits::kPrefillChunk);
  limits::require_in("engine: max context", options.max_context, limits::kContext);
  limits::require_in("engine: threads", options.threads, limits::kThreads);
  limits::require_in("engine: parallel", options.parallel, limits::kParallel);
  limits::require_in("engine: step rows", options.step_rows, limits::kStepRows);
  limits::require_in("engine: KV budget (MiB)", options.kv_budget_mb, limits::kKvBudgetMb);
  if (const std::string error = limits::gamma_text_error(options.gamma); !error.empty())
    fail("engine: gamma {}", error);

  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  e->gamma_ = parse_gamma_choice(options.gamma);
  const DrafterConvention convention = parse_drafter_convention(options.drafter_compat);
  const DrafterQuant draft_quant = parse_drafter_quant(options.draft_quant);
  const DrafterHead draft_head = parse_drafter_head(options.draft_head);

  TargetOptions to;
  to.prefill_chunk = options.prefill_chunk;
  to.max_context = options.max_context;
  to.precision = options.precision;
  to.kv_type = options.kv_type;
  to.packed_cache_dir = options.packed_cache_dir;
  to.load_threads = options.threads;
  // The cache must be able to roll back every draft of the largest gamma a round may use.
  const int64_t needed = e->gamma_.automatic ? e->gamma_.max_gamma : e->gamma_.fixed;
  to.rollback_reserve = std::max(to.rollback_reserve, needed);

  // The tokenizer and chat template come first: their end-of-turn and eos tokens join the
  // target's EOS set as it loads (docs/gemma4.md §2.5).
  auto t0 = Clock::now();
  CheckpointTokenizer found = find_checkpoint_tokenizer(options.model_dir);
  if (found.tokenizer) {
    e->tokenizer_ = std::move(found.tokenizer);
    e->tokenizer_origin_ = found.origin;
    say(fmt::format("loaded tokenizer: {} tokens from {} ({:.0f} ms)", e->tokenizer_->vocab_size(), found.origin,
                    ms_since(t0)));
  } else {
    e->no_tokenizer_reason_ = found.missing;
    if (!found.origin.empty()) say(fmt::format("no tokenizer: {}", found.missing));
  }
  if (!options.chat_template_file.empty()) {
    const ChatTemplate given = ChatTemplate::from_file(options.chat_template_file);
    e->template_ =
        std::make_unique<ChatTemplate>(given.source(), given.origin(), checkpoint_special_tokens(options.model_dir));
    say(fmt::format("chat template: {}", options.chat_template_file));
  } else if (checkpoint_has_chat_template(options.model_dir)) {
    e->template_ = std::make_unique<ChatTemplate>(load_checkpoint_chat_template(options.model_dir));
    say(fmt::format("chat template: {}", e->template_->origin()));
  }
  std::vector<int32_t> tokenizer_eos;
  if (e->tokenizer_) {
    tokenizer_eos = tokenizer_eos_ids(*e->tokenizer_, checkpoint_special_tokens(options.model_dir), e->template_.get());
  }

  t0 = Clock::now();
  say(fmt::format("loading target {} ({} precision) ...", options.model_dir, precision_name(options.precision)));
  e->model_ = load_target_with_eos(options.model_dir, to, tokenizer_eos);
  const TargetConfig& cfg = e->model_->config();
  say(fmt::format("loaded target: {} layers, hidden {}, vocab {}, context {} ({:.0f} ms)", cfg.text.num_hidden_layers,
                  e->model_->hidden_size(), e->model_->vocab_size(), e->model_->max_context(), ms_since(t0)));
  if (e->tokenizer_ && static_cast<int64_t>(e->tokenizer_->vocab_size()) > e->model_->vocab_size()) {
    // Trailing special tokens beyond the embedding (multimodal placeholders) are never produced
    // by text; anything else would index past the embedding table.
    int64_t used = static_cast<int64_t>(e->tokenizer_->vocab_size());
    while (used > 0 && e->tokenizer_->is_special(static_cast<int32_t>(used - 1))) --used;
    if (used > e->model_->vocab_size())
      fail("{}: the tokenizer uses ids up to {} but the model's vocab_size is {}", e->tokenizer_origin_, used - 1,
           e->model_->vocab_size());
  }

  if (options.draft == "lookup") {
    say("draft source: prompt lookup");
  } else if (!options.draft.empty()) {
    t0 = Clock::now();
    say(fmt::format("loading drafter {} ({}) ...", options.draft, drafter_convention_name(convention)));
    e->drafter_ = Drafter::load(options.draft, *e->model_, convention, draft_quant, draft_head);
    const std::string copies = drafter_copies_note(*e->drafter_);
    say(fmt::format("loaded drafter: {} layers, {}{} ({:.0f} ms)", e->drafter_->checkpoint().config.layers.size(),
                    drafter_head_note(*e->drafter_), copies.empty() ? "" : ", " + copies, ms_since(t0)));
  }

  if (e->model_->checkpoint().generation) {
    e->default_sampling_ = sampling_params_from_generation_config(*e->model_->checkpoint().generation);
  } else {
    e->default_sampling_ = SpeculativeOptions::greedy_sampling();
  }
  e->pool_ = std::make_unique<ThreadPool>(options.threads);
  SchedulerOptions so;
  so.slots = options.parallel;
  so.step_rows = options.step_rows;
  so.prompt_cache = options.prompt_cache;
  so.kv_budget_bytes = static_cast<uint64_t>(options.kv_budget_mb) << 20;
  e->scheduler_ = std::make_unique<Scheduler>(*e->model_, *e->pool_, so);
  return e;
}

std::string Engine::model_name() const {
  // A single file is named by its stem ("gemma-4-e2b" for gemma-4-e2b.safetensors or .gguf).
  std::error_code ec;
  if (fs::is_regular_file(options_.model_dir, ec)) return fs::path(options_.model_dir).stem().string();
  return last_component(options_.model_dir);
}

std::string Engine::draft_description() const {
  if (options_.draft.empty()) return "none";
  if (options_.draft == "lookup") return "lookup";
  return last_component(options_.draft);
}

int64_t Engine::max_context() const { return model_->max_context(); }

int Engine::threads() const { return pool_->size(); }

// ---- text helpers ----

void Engine::require_tokenizer(const char* what) const {
  if (!tokenizer_) fail("{} needs the checkpoint's tokenizer, and there is none: {}", what, no_tokenizer_reason_);
}

std::vector<int32_t> Engine::encode(const std::string& text, bool add_special_tokens) const {
  require_tokenizer("text");
  // Tokenizer::encode is safe to call concurrently (its word cache has its own mutex).
  return tokenizer_->encode(text, add_special_tokens);
}

std::string Engine::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  require_tokenizer("text");
  return tokenizer_->decode(ids, skip_special_tokens);
}

std::string Engine::render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                bool add_generation_prompt, const nlohmann::ordered_json& extra_variables) const {
  if (!template_)
    fail(
        "{} has no chat template (chat_template.jinja or tokenizer_config.json's chat_template); give one with "
        "--chat-template FILE",
        options_.model_dir);
  return template_->render(messages, tools, add_generation_prompt, extra_variables);
}

std::vector<int32_t> Engine::encode_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                         const nlohmann::ordered_json& extra_variables) const {
  const std::string rendered = render_chat(messages, tools, /*add_generation_prompt=*/true, extra_variables);
  return encode(rendered, /*add_special_tokens=*/false);  // the template writes <bos> itself
}

// ---- prompt cache ----

void Engine::clear_prompt_cache() { scheduler_->clear_prompt_cache(); }

int64_t Engine::cached_tokens() const { return scheduler_->cached_tokens(); }

int Engine::parallel() const { return scheduler_->slots(); }
int64_t Engine::running() const { return scheduler_->running(); }
int64_t Engine::waiting() const { return scheduler_->waiting(); }
double Engine::kv_utilization() const { return scheduler_->kv_utilization(); }

std::shared_ptr<const grammar::TokenTrie> Engine::token_vocabulary() const {
  std::call_once(token_vocabulary_once_,
                 [&] { token_vocabulary_ = build_token_vocabulary(*tokenizer_, model_->vocab_size()); });
  return token_vocabulary_;
}

// ---- generation ----

GenerationResult Engine::generate(const GenerationRequest& request, const GenerationCallback& on_event) {
  // ---- validation: nothing below throws for a bad request once work has started ----
  const std::vector<int32_t>& prompt = request.prompt;
  const int64_t vocab = model_->vocab_size();
  if (prompt.empty()) fail("engine: the prompt is empty (it must hold at least the BOS token)");
  if (static_cast<int64_t>(prompt.size()) + 1 > model_->max_context())
    fail(
        "engine: the prompt has {} tokens but the context holds {} (the prompt and at least one generated token "
        "must fit)",
        prompt.size(), model_->max_context());
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      fail("engine: prompt token {} at position {} is outside the vocabulary [0, {})", prompt[i], i, vocab);
  if (request.max_tokens < 0) fail("engine: max_tokens {} must be >= 0", request.max_tokens);
  if (request.top_logprobs < -1 || request.top_logprobs > kMaxTopLogprobs)
    fail("engine: top_logprobs {} must be in [0, {}] (or -1 for none)", request.top_logprobs, kMaxTopLogprobs);
  validate_for_vocab(request.sampling, vocab);
  const bool any_stop = std::any_of(request.stop.begin(), request.stop.end(), [](const auto& s) { return !s.empty(); });
  if (any_stop) require_tokenizer("a stop string");
  if (request.grammar) require_tokenizer("constrained output");

  const bool has_draft_source = drafter_ != nullptr || options_.draft == "lookup";
  const bool speculate = request.speculative && has_draft_source;
  ScheduledGeneration work;
  work.prompt = prompt;
  work.drafter = speculate ? drafter_.get() : nullptr;
  SpeculativeOptions& so = work.options;
  so.max_tokens = request.max_tokens;
  so.ignore_eos = request.ignore_eos;
  so.sampling = request.sampling;
  if (request.grammar) so.constraint = {request.grammar, token_vocabulary()};
  if (speculate) {
    so.method = drafter_ ? DraftMethod::Drafter : DraftMethod::Lookup;
    so.gamma = request.gamma.value_or(gamma_);
    const int64_t reserve = model_->options().rollback_reserve;
    if (so.gamma.automatic && so.gamma.max_gamma < 0) fail("engine: max gamma {} must be >= 0", so.gamma.max_gamma);
    if (!so.gamma.automatic && (so.gamma.fixed < 0 || so.gamma.fixed > reserve))
      fail("engine: gamma {} must be in [0, {}] (the cache's rollback reserve; load with a larger --gamma to raise it)",
           so.gamma.fixed, reserve);
  } else {  // plain decoding through the same loop: rounds without drafts
    so.method = DraftMethod::Lookup;
    so.gamma = GammaChoice{};
    so.gamma.fixed = 0;
  }

  // ---- streaming: tokens of one decode step form one event (callbacks run on the scheduler) ----
  GenerationResult result;
  GenerationTextStream stream(tokenizer_.get(), request.skip_special_tokens, request.stop);
  GenerationEvent pending;
  bool cancelled = false;
  const auto start = Clock::now();
  double first_token_ms = -1.0;
  so.on_emit = [&](int32_t token, std::span<const float> logits) {
    if (first_token_ms < 0) first_token_ms = ms_since(start);
    pending.tokens.push_back(token);
    if (request.top_logprobs >= 0)
      pending.logprobs.push_back(token_logprobs(logits, token, request.top_logprobs, tokenizer_.get()));
    pending.text += stream.push(token);
    return !stream.stopped();  // a stop string ends generation at this token
  };
  auto flush = [&]() {
    if (pending.tokens.empty() && pending.text.empty()) return true;
    result.text += pending.text;
    result.logprobs.insert(result.logprobs.end(), pending.logprobs.begin(), pending.logprobs.end());
    const bool go_on = on_event ? on_event(pending) : true;
    pending = GenerationEvent{};
    return go_on;
  };
  so.on_step = [&] {
    if (flush()) return true;
    cancelled = true;
    return false;
  };

  int64_t cached = 0;
  const SpeculativeResult r = scheduler_->run(std::move(work), &cached);
  pending.text += stream.finish();
  flush();  // the last tokens (or held-back text); generation is over, so its answer does not matter

  result.tokens = r.tokens;
  result.finish_reason = finish_reason_of(r.stop_reason, stream.stopped(), cancelled);
  result.stop_index = stream.stopped() ? stream.stop_index() : -1;
  GenerationStats& st = result.stats;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  st.cached_tokens = cached;
  st.completion_tokens = static_cast<int64_t>(r.tokens.size());
  st.drafted = r.stats.drafted;
  st.accepted = r.stats.accepted;
  st.target_calls = r.stats.target_calls;
  st.prefill_ms = r.stats.prefill_ms;
  st.decode_ms = r.stats.decode_ms;
  st.time_to_first_token_ms = first_token_ms >= 0 ? first_token_ms : 0.0;
  return result;
}

}  // namespace specula
