#include "specula/server/completion_job.h"

#include <algorithm>
#include <ctime>
#include <optional>

#include <fmt/format.h>

#include "specula/grammar/token_mask.h"
#include "specula/grammar/tool_call_grammar.h"
#include "specula/model/target_model.h"
#include "specula/sample/rng.h"
#include "specula/server/tool_call_stream.h"
#include "specula/text/tokenizer.h"
#include "specula/util/error.h"

namespace specula::server {

namespace {

using Clock = std::chrono::steady_clock;

void require_tokenizer(const Engine& engine) {
  if (engine.tokenizer() == nullptr) {
    throw ApiError(400, "invalid_request_error",
                   "the served checkpoint has no usable tokenizer (" + engine.no_tokenizer_reason() +
                       "): only token-id prompts work");
  }
}

// The request's gamma, refused when a fixed length needs more rollback reserve than the loaded
// caches keep (the server's --gamma sets it).
GammaChoice checked_gamma(const Engine& engine, const std::string& text) {
  const GammaChoice choice = parse_gamma_choice(text);
  const int64_t reserve = engine.model().options().rollback_reserve;
  if (!choice.automatic && choice.fixed > reserve) {
    throw invalid_request(fmt::format("'gamma' must be in [0, {}] or \"auto\", got {}: the KV cache keeps a rollback "
                                      "reserve of {} drafts (start the server with a larger --gamma to raise it)",
                                      reserve, choice.fixed, reserve),
                          "gamma");
  }
  return choice;
}

// Token terminals (<[id]>) must be special tokens of the served vocabulary; refused with a 400 naming
// `param` before any work starts.
void refuse_bad_token_terminals(const Engine& engine, const grammar::Grammar& g, const std::string& param) {
  if (g.token_terminals().empty()) return;
  try {
    grammar::check_token_terminals(g, *engine.token_vocabulary(), static_cast<size_t>(engine.model().vocab_size()),
                                   engine.model().eos_token_ids());
  } catch (const specula::Error& e) {
    throw invalid_request(fmt::format("'{}' is invalid: {}", param, e.what()), param);
  }
}

// Context check, max_tokens, sampling and the specula extension: shared by both endpoints.
void finish_prepare(const Engine& engine, const GenerationParams& params, const PrepareOptions& options,
                    const char* prompt_param, PreparedJob& job) {
  GenerationRequest& g = job.generation;
  const int64_t context = engine.max_context();
  const auto prompt_tokens = static_cast<int64_t>(g.prompt.size());
  if (prompt_tokens + 1 > context) {
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the prompt has {} tokens and the context holds {}: at least one token must fit for the "
                               "answer",
                               prompt_tokens, context),
                   prompt_param, "context_length_exceeded");
  }
  const int64_t room = context - prompt_tokens;
  g.max_tokens = params.max_tokens ? std::min(*params.max_tokens, room) : std::min(room, options.max_tokens_default);
  try {
    g.sampling = apply_overrides(engine.default_sampling(), params.sampling);
    if (!params.sampling.seed) g.sampling.seed = fresh_seed();  // unseeded: a new draw every time
    validate_for_vocab(g.sampling, engine.model().vocab_size());
  } catch (const specula::Error& e) {
    throw invalid_request(e.what(), "");
  }
  g.ignore_eos = params.ignore_eos;
  if (params.grammar) refuse_bad_token_terminals(engine, *params.grammar, params.grammar_field);
  g.grammar = params.grammar;
  g.speculative = params.speculative.value_or(true);
  if (params.gamma) g.gamma = checked_gamma(engine, *params.gamma);
  g.stop = params.stop;
  job.stop = params.stop;
  job.stream = params.stream;
  job.include_usage = params.stream && params.include_usage;
  job.header.created = static_cast<int64_t>(std::time(nullptr));
  job.header.model = engine.model_name();
}

// tool_choice "required" or a named function: the output is constrained to Gemma 4 tool calls of
// the request's tools (grammar/tool_call_grammar.h).
void constrain_to_tool_calls(const Engine& engine, const ChatCompletionRequest& request, PreparedJob& job) {
  if (request.tool_choice != ToolChoice::Required && request.tool_choice != ToolChoice::Function) return;
  const text::Tokenizer& tokenizer = *engine.tokenizer();
  const auto begin = tokenizer.token_to_id(text::kToolCallBegin);
  const auto end = tokenizer.token_to_id(text::kToolCallEnd);
  const auto delimiter = tokenizer.token_to_id(text::kToolStringDelimiter);
  if (!begin || !end || !delimiter)
    throw invalid_request(
        "'tool_choice' forces a tool call, which needs the Gemma 4 tool-call tokens (<|tool_call>, "
        "<tool_call|>, <|\"|>): the served tokenizer lacks them",
        "tool_choice");
  const grammar::ToolCallChoice choice{request.tool_choice_function, request.parallel_tool_calls};
  std::shared_ptr<const grammar::Grammar> g;
  try {
    g = std::make_shared<const grammar::Grammar>(
        grammar::tool_call_grammar(request.tools, choice, {*begin, *end, *delimiter}));
  } catch (const specula::Error& e) {
    throw invalid_request(fmt::format("'tools' cannot be enforced by 'tool_choice': {}", e.what()), "tools");
  }
  refuse_bad_token_terminals(engine, *g, "tool_choice");
  job.generation.grammar = std::move(g);
}

Usage usage_of(const GenerationStats& s, uint64_t seed) {
  return {s.prompt_tokens, s.completion_tokens, s.cached_tokens, s.drafted, s.accepted, seed};
}

}  // namespace

PreparedJob prepare_chat_job(const Engine& engine, const ChatCompletionRequest& request,
                             const PrepareOptions& options) {
  require_tokenizer(engine);
  if (engine.chat_template() == nullptr) {
    throw ApiError(400, "invalid_request_error", "the served checkpoint has no chat template: use /v1/completions");
  }
  PreparedJob job;
  job.arrival = Clock::now();
  job.chat = true;
  job.header.id = "chatcmpl-" + random_id();
  try {
    job.generation.prompt = engine.encode_chat(request.messages, request.tools, request.chat_template_kwargs);
  } catch (const specula::Error& e) {
    throw invalid_request(fmt::format("the chat template could not render the messages: {}", e.what()), "messages");
  }
  finish_prepare(engine, request.params, options, "messages", job);
  constrain_to_tool_calls(engine, request, job);
  if (request.logprobs) job.logprobs = request.top_logprobs;
  job.generation.top_logprobs = job.logprobs;
  if (request.tools.is_array()) {
    const auto begin = engine.tokenizer()->token_to_id(text::kToolCallBegin);
    const auto end = engine.tokenizer()->token_to_id(text::kToolCallEnd);
    if (begin && end) {
      job.parse_tool_calls = true;
      job.tool_call_begin = *begin;
      job.tool_call_end = *end;
      job.generation.stop.clear();  // matched on the content by ToolCallStream, not inside calls
    }
  }
  return job;
}

PreparedJob prepare_completion_job(const Engine& engine, const CompletionRequest& request,
                                   const PrepareOptions& options) {
  PreparedJob job;
  job.arrival = Clock::now();
  job.chat = false;
  job.header.id = "cmpl-" + random_id();
  if (request.prompt_tokens) {
    job.generation.prompt = *request.prompt_tokens;
  } else {
    require_tokenizer(engine);
    job.generation.prompt = engine.encode(request.prompt, /*add_special_tokens=*/true);
  }
  finish_prepare(engine, request.params, options, "prompt", job);
  job.logprobs = request.logprobs;
  job.generation.top_logprobs = request.logprobs;
  return job;
}

JobOutcome run_job(Engine& engine, const PreparedJob& job, const std::atomic<bool>& cancelled,
                   const std::function<void(std::string)>& emit, Metrics& metrics) {
  JobOutcome outcome;
  outcome.prompt_tokens = static_cast<int64_t>(job.generation.prompt.size());
  const ResponseHeader& h = job.header;
  std::optional<ToolCallStream> tools;
  if (job.parse_tool_calls) tools.emplace(*engine.tokenizer(), job.tool_call_begin, job.tool_call_end, job.stop);

  std::optional<Clock::time_point> first_token;
  bool sent_role = false;
  int64_t text_offset = 0;
  std::string content;  // non-streaming tool mode

  auto emit_chat_delta = [&](const std::string& piece, const ojson& logprobs) {
    ojson delta = ojson::object();
    if (!sent_role) delta["role"] = "assistant";
    delta["content"] = piece;
    sent_role = true;
    emit(sse_event(chat_chunk_json(h, delta, std::nullopt, logprobs)));
  };

  auto on_event = [&](const GenerationEvent& ev) -> bool {
    if (!ev.tokens.empty() && !first_token) first_token = Clock::now();
    const std::string piece = tools ? tools->push(ev.tokens) : ev.text;
    if (job.stream) {
      const bool with_logprobs = job.logprobs >= 0 && !ev.logprobs.empty();
      if (job.chat) {
        const ojson lp = with_logprobs ? chat_logprobs_json(ev.logprobs, job.logprobs) : ojson(nullptr);
        if (!piece.empty() || with_logprobs || !sent_role) emit_chat_delta(piece, lp);
      } else if (!piece.empty() || with_logprobs) {
        const ojson lp =
            with_logprobs ? completion_logprobs_json(ev.logprobs, job.logprobs, text_offset) : ojson(nullptr);
        for (const auto& t : ev.logprobs) text_offset += static_cast<int64_t>(t.chosen.text.size());
        emit(sse_event(completion_chunk_json(h, piece, std::nullopt, lp)));
      }
    } else if (tools) {
      content += piece;
    }
    if (cancelled) return false;
    return !(tools && tools->stopped());
  };

  GenerationResult result;
  try {
    result = engine.generate(job.generation, on_event);
  } catch (const std::exception& e) {
    // The engine validates a request before any work (e.g. a gamma beyond the cache's rollback
    // reserve): such an error, before the first token, is the request's fault.
    const bool request_error = !first_token && dynamic_cast<const specula::Error*>(&e) != nullptr;
    const ApiError error = request_error
                               ? invalid_request(e.what(), "")
                               : ApiError(500, "server_error", fmt::format("the generation failed: {}", e.what()));
    outcome.status = error.status;
    outcome.body = error_json(error);
    if (job.stream) {
      emit(sse_event(outcome.body));
      emit(kSseDone);
    }
    return outcome;
  }
  const Clock::time_point end = Clock::now();

  std::string finish = result.finish_reason;
  std::string rest;
  std::vector<ChatToolCall> calls;
  if (tools) {
    rest = tools->finish();
    // A stop string in the content ended the generation through the callback: that is a stop.
    if (finish == "cancelled" && tools->stopped() && !cancelled) finish = "stop";
    for (const auto& c : tools->calls()) calls.push_back({"call_" + random_id(), c.name, c.arguments.dump()});
    if (!calls.empty() && finish != "cancelled") finish = "tool_calls";
  }
  outcome.cancelled = finish == "cancelled";
  outcome.completion_tokens = result.stats.completion_tokens;
  outcome.drafted_tokens = result.stats.drafted;
  outcome.accepted_tokens = result.stats.accepted;
  if (first_token)
    outcome.time_to_first_token_ms = std::chrono::duration<double, std::milli>(*first_token - job.arrival).count();

  const GenerationStats& s = result.stats;
  metrics.add_tokens(s.prompt_tokens, s.cached_tokens, s.completion_tokens, s.drafted, s.accepted);
  if (outcome.cancelled) metrics.count_cancelled();
  if (first_token) {
    metrics.observe_time_to_first_token(std::chrono::duration<double>(*first_token - job.arrival).count());
    if (s.completion_tokens > 1) {
      metrics.observe_time_per_output_token(std::chrono::duration<double>(end - *first_token).count() /
                                            static_cast<double>(s.completion_tokens - 1));
    }
  }
  const Usage usage = usage_of(s, job.generation.sampling.seed);

  if (job.stream) {
    if (job.chat) {
      if (!rest.empty() || !sent_role) emit_chat_delta(rest, nullptr);
      if (!calls.empty()) emit(sse_event(chat_chunk_json(h, {{"tool_calls", tool_calls_delta(calls)}}, std::nullopt)));
      emit(sse_event(chat_chunk_json(h, ojson::object(), finish)));
    } else {
      emit(sse_event(completion_chunk_json(h, "", finish)));
    }
    if (job.include_usage)
      emit(sse_event(usage_chunk_json(h, job.chat ? "chat.completion.chunk" : "text_completion", usage)));
    emit(kSseDone);
    return outcome;
  }
  if (job.chat) {
    const ojson lp = job.logprobs >= 0 ? chat_logprobs_json(result.logprobs, job.logprobs) : ojson(nullptr);
    outcome.body = chat_completion_json(h, tools ? content + rest : result.text, calls, finish, lp, usage);
  } else {
    const ojson lp = job.logprobs >= 0 ? completion_logprobs_json(result.logprobs, job.logprobs, 0) : ojson(nullptr);
    outcome.body = completion_json(h, result.text, finish, lp, usage);
  }
  return outcome;
}

}  // namespace specula::server
