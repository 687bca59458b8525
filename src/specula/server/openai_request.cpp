#include "specula/server/openai_request.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "specula/engine/option_limits.h"
#include "specula/server/output_constraint.h"
#include "specula/util/error.h"

namespace specula::server {

namespace {

using ojson = nlohmann::ordered_json;

// Nesting deeper than this is refused before parsing: no real request needs it, and it keeps every
// later recursive walk (dump, the template) shallow.
constexpr int kMaxNesting = 64;

const char* type_name(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return "null";
    case ojson::value_t::boolean: return "boolean";
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned: return "integer";
    case ojson::value_t::number_float: return "number";
    case ojson::value_t::string: return "string";
    case ojson::value_t::array: return "array";
    case ojson::value_t::object: return "object";
    default: return "value";
  }
}

ApiError wrong_type(const std::string& param, const char* expected, const ojson& got) {
  return invalid_request(fmt::format("'{}' must be {}, got {}", param, expected, type_name(got)), param);
}

// Refuses JSON text nested deeper than kMaxNesting before it is parsed: nlohmann's parser and
// copies recurse once per level. `what` names the text in the error ("the JSON body", a field).
void check_nesting(std::string_view body, const std::string& what = "the JSON body", const std::string& param = "") {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxNesting) {
        throw invalid_request(fmt::format("{} nests deeper than {} levels", what, kMaxNesting), param);
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

ojson parse_body(std::string_view body) {
  check_nesting(body);
  ojson doc;
  try {
    doc = ojson::parse(body.begin(), body.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw invalid_request(fmt::format("the body is not valid JSON (byte {}): {}", e.byte, e.what()), "");
  } catch (const nlohmann::json::exception& e) {  // e.g. a number outside the range of a double
    throw invalid_request(fmt::format("the body is not usable JSON: {}", e.what()), "");
  }
  if (!doc.is_object())
    throw invalid_request(fmt::format("the body must be a JSON object, got {}", type_name(doc)), "");
  return doc;
}

// The value of `key`, or null when absent (absent and null mean the same: "use the default").
const ojson& field(const ojson& obj, const char* key) {
  static const ojson null_value;
  const auto it = obj.find(key);
  return it == obj.end() ? null_value : *it;
}

std::optional<bool> get_bool(const ojson& obj, const char* key) {
  const ojson& v = field(obj, key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) throw wrong_type(key, "a boolean", v);
  return v.get<bool>();
}

std::optional<double> get_number(const ojson& obj, const char* key, const limits::RealRange& range) {
  const ojson& v = field(obj, key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) throw wrong_type(key, "a number", v);
  const double x = v.get<double>();
  if (!limits::contains(range, x)) {
    throw invalid_request(fmt::format("'{}' must be in {}, got {}", key, limits::describe(range), x), key);
  }
  return x;
}

int64_t as_integer(const ojson& v, const std::string& param, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw invalid_request(fmt::format("'{}' must be in [{}, {}], got {}", param, lo, hi, u), param);
    }
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else {
    throw wrong_type(param, "an integer", v);
  }
  if (x < lo || x > hi) throw invalid_request(fmt::format("'{}' must be in [{}, {}], got {}", param, lo, hi, x), param);
  return x;
}

std::optional<int64_t> get_int(const ojson& obj, const char* key, int64_t lo, int64_t hi) {
  const ojson& v = field(obj, key);
  if (v.is_null()) return std::nullopt;
  return as_integer(v, key, lo, hi);
}

std::optional<std::string> get_string(const ojson& obj, const char* key) {
  const ojson& v = field(obj, key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_string()) throw wrong_type(key, "a string", v);
  return v.get<std::string>();
}

int32_t token_id(const ojson& v, const std::string& param, const RequestLimits& limits) {
  const int64_t hi = limits.vocab_size > 0 ? limits.vocab_size - 1 : std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(as_integer(v, param, 0, hi));
}

void parse_stop(const ojson& obj, const RequestLimits& limits, std::vector<std::string>& out) {
  const ojson& v = field(obj, "stop");
  if (v.is_null()) return;
  auto add = [&](const ojson& s, const std::string& param) {
    if (!s.is_string()) throw wrong_type(param, "a string", s);
    const std::string text = s.get<std::string>();
    if (text.empty()) throw invalid_request(fmt::format("'{}' must not be empty", param), param);
    if (text.size() > limits.max_stop_length) {
      throw invalid_request(
          fmt::format("'{}' is {} bytes, the limit is {}", param, text.size(), limits.max_stop_length), param);
    }
    out.push_back(text);
  };
  if (v.is_string()) {
    add(v, "stop");
  } else if (v.is_array()) {
    if (v.size() > limits.max_stop_strings) {
      throw invalid_request(fmt::format("'stop' has {} strings, the limit is {}", v.size(), limits.max_stop_strings),
                            "stop");
    }
    for (size_t i = 0; i < v.size(); ++i) add(v[i], fmt::format("stop[{}]", i));
  } else {
    throw wrong_type("stop", "a string or an array of strings", v);
  }
}

void parse_logit_bias(const ojson& obj, const RequestLimits& limits, SamplingOverrides& s) {
  const ojson& v = field(obj, "logit_bias");
  if (v.is_null()) return;
  if (!v.is_object()) throw wrong_type("logit_bias", "an object mapping token ids to biases", v);
  if (v.size() > limits.max_logit_bias) {
    throw invalid_request(fmt::format("'logit_bias' has {} entries, the limit is {}", v.size(), limits.max_logit_bias),
                          "logit_bias");
  }
  std::map<int32_t, double> bias;
  for (const auto& [key, value] : v.items()) {
    const std::string param = fmt::format("logit_bias.{}", key);
    // Keys are decimal token ids ("123"), as OpenAI's tokenizer ids are.
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos)
      id = std::stoll(key);
    const int64_t hi = limits.vocab_size > 0 ? limits.vocab_size - 1 : std::numeric_limits<int32_t>::max();
    if (id < 0 || id > hi) {
      throw invalid_request(fmt::format("'logit_bias' key '{}' is not a token id in [0, {}]", key, hi), param);
    }
    if (!value.is_number()) throw wrong_type(param, "a number", value);
    const double b = value.get<double>();
    if (!limits::contains(limits::kLogitBias, b)) {
      throw invalid_request(fmt::format("'{}' must be in {}, got {}", param, limits::describe(limits::kLogitBias), b),
                            param);
    }
    bias[static_cast<int32_t>(id)] = b;
  }
  s.logit_bias = std::move(bias);
}

GenerationParams parse_common(const ojson& doc, const RequestLimits& limits) {
  GenerationParams p;
  if (auto model = get_string(doc, "model")) p.model = *model;

  if (const ojson& n = field(doc, "n"); !n.is_null()) {
    const int64_t count = as_integer(n, "n", 1, std::numeric_limits<int64_t>::max());
    if (count != 1)
      throw invalid_request(fmt::format("'n' must be 1: one choice per request is supported, got {}", count), "n");
  }
  if (const ojson& best_of = field(doc, "best_of"); !best_of.is_null()) {
    if (as_integer(best_of, "best_of", 1, std::numeric_limits<int64_t>::max()) != 1) {
      throw invalid_request("'best_of' must be 1: one candidate per request is supported", "best_of");
    }
  }

  p.max_tokens = get_int(doc, "max_tokens", limits::kMaxTokens.lo, limits.max_tokens);
  if (auto m = get_int(doc, "max_completion_tokens", limits::kMaxTokens.lo, limits.max_tokens)) p.max_tokens = m;

  SamplingOverrides& s = p.sampling;
  s.temperature = get_number(doc, "temperature", limits::kTemperature);
  s.top_p = get_number(doc, "top_p", limits::kTopP);
  s.min_p = get_number(doc, "min_p", limits::kMinP);
  s.presence_penalty = get_number(doc, "presence_penalty", limits::kPresencePenalty);
  s.frequency_penalty = get_number(doc, "frequency_penalty", limits::kFrequencyPenalty);
  s.repetition_penalty = get_number(doc, "repetition_penalty", limits::kRepetitionPenalty);
  if (auto k = get_int(doc, "top_k", -1, limits::kTopK.hi)) {
    s.top_k = static_cast<int>(*k < 0 ? 0 : *k);  // vLLM's -1 = off
  }
  if (const ojson& seed = field(doc, "seed"); !seed.is_null()) {
    if (seed.is_number_unsigned())
      s.seed = seed.get<uint64_t>();
    else if (seed.is_number_integer())
      s.seed = static_cast<uint64_t>(seed.get<int64_t>());
    else
      throw wrong_type("seed", "an integer", seed);
  }
  parse_logit_bias(doc, limits, s);
  parse_stop(doc, limits, p.stop);

  p.stream = get_bool(doc, "stream").value_or(false);
  if (const ojson& so = field(doc, "stream_options"); !so.is_null()) {
    if (!so.is_object()) throw wrong_type("stream_options", "an object", so);
    const ojson& iu = field(so, "include_usage");
    if (!iu.is_null() && !iu.is_boolean()) throw wrong_type("stream_options.include_usage", "a boolean", iu);
    p.include_usage = iu.is_boolean() && iu.get<bool>();
  }
  p.ignore_eos = get_bool(doc, "ignore_eos").value_or(false);

  p.speculative = get_bool(doc, "speculative");
  if (const ojson& g = field(doc, "gamma"); !g.is_null()) {
    if (g.is_string()) {
      p.gamma = g.get<std::string>();
      if (const std::string error = limits::gamma_text_error(*p.gamma); !error.empty()) {
        throw invalid_request(fmt::format("'gamma': {}", error), "gamma");
      }
    } else if (g.is_number_integer() || g.is_number_unsigned()) {
      p.gamma = std::to_string(as_integer(g, "gamma", limits::kGamma.lo, limits::kGamma.hi));
    } else {
      throw wrong_type("gamma",
                       fmt::format("a draft length in {} or \"auto\"", limits::describe(limits::kGamma)).c_str(), g);
    }
  }
  OutputConstraint constraint = parse_output_constraint(doc);
  p.grammar = std::move(constraint.grammar);
  p.grammar_field = std::move(constraint.field);
  return p;
}

// Text of a content value: a string, or an array of {"type": "text", "text": ...} parts (joined).
std::string content_text(const ojson& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw wrong_type(param, "a string or an array of content parts", content);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& part = content[j];
    const std::string pp = fmt::format("{}[{}]", param, j);
    if (!part.is_object()) throw wrong_type(pp, "an object", part);
    const ojson& type = field(part, "type");
    if (!type.is_string()) throw wrong_type(pp + ".type", "a string", type);
    if (type.get<std::string>() != "text") {
      throw invalid_request(
          fmt::format("'{}.type' is \"{}\": only text content is supported", pp, type.get<std::string>()),
          pp + ".type");
    }
    const ojson& t = field(part, "text");
    if (!t.is_string()) throw wrong_type(pp + ".text", "a string", t);
    text += t.get<std::string>();
  }
  return text;
}

ojson parse_tool_calls(const ojson& calls, const std::string& param) {
  if (!calls.is_array()) throw wrong_type(param, "an array", calls);
  ojson out = ojson::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const ojson& call = calls[j];
    const std::string pp = fmt::format("{}[{}]", param, j);
    if (!call.is_object()) throw wrong_type(pp, "an object", call);
    const ojson& fn = field(call, "function");
    if (!fn.is_object()) throw wrong_type(pp + ".function", "an object", fn);
    const ojson& name = field(fn, "name");
    if (!name.is_string() || name.get<std::string>().empty()) {
      throw invalid_request(fmt::format("'{}.function.name' must be a non-empty string", pp), pp + ".function.name");
    }
    // OpenAI sends arguments as a JSON string; the Gemma template wants the object.
    const ojson& args = field(fn, "arguments");
    ojson parsed = ojson::object();
    if (args.is_string()) {
      const std::string& text = args.get_ref<const std::string&>();
      check_nesting(text, fmt::format("'{}.function.arguments'", pp), pp + ".function.arguments");
      try {
        parsed = ojson::parse(text);
      } catch (const nlohmann::json::exception&) {
        throw invalid_request(fmt::format("'{}.function.arguments' is not valid JSON", pp), pp + ".function.arguments");
      }
    } else if (!args.is_null()) {
      parsed = args;
    }
    if (!parsed.is_object()) {
      throw invalid_request(fmt::format("'{}.function.arguments' must encode a JSON object", pp),
                            pp + ".function.arguments");
    }
    ojson entry = {{"id", field(call, "id").is_string() ? field(call, "id") : ojson(fmt::format("call_{}", j))},
                   {"type", "function"},
                   {"function", {{"name", name}, {"arguments", parsed}}}};
    out.push_back(std::move(entry));
  }
  return out;
}

ojson parse_messages(const ojson& doc, const RequestLimits& limits) {
  const ojson& msgs = field(doc, "messages");
  if (msgs.is_null()) throw invalid_request("'messages' is required", "messages");
  if (!msgs.is_array()) throw wrong_type("messages", "an array", msgs);
  if (msgs.empty()) throw invalid_request("'messages' must not be empty", "messages");
  if (msgs.size() > limits.max_messages) {
    throw invalid_request(fmt::format("'messages' has {} entries, the limit is {}", msgs.size(), limits.max_messages),
                          "messages");
  }
  ojson out = ojson::array();
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ojson& m = msgs[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw wrong_type(param, "an object", m);
    const ojson& role_v = field(m, "role");
    if (!role_v.is_string()) throw wrong_type(param + ".role", "a string", role_v);
    const std::string role = role_v.get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool") {
      throw invalid_request(
          fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; got \"{}\"", param, role),
          param + ".role");
    }
    ojson msg = {{"role", role}};
    const ojson& content = field(m, "content");
    const ojson& calls = field(m, "tool_calls");
    if (content.is_null()) {
      if (role != "assistant" || calls.is_null()) {
        throw invalid_request(fmt::format("'{}.content' is required", param), param + ".content");
      }
      msg["content"] = nullptr;
    } else {
      msg["content"] = content_text(content, param + ".content");
    }
    if (!calls.is_null()) {
      if (role != "assistant") {
        throw invalid_request(fmt::format("'{}.tool_calls' is only allowed on assistant messages", param),
                              param + ".tool_calls");
      }
      if (!calls.empty()) msg["tool_calls"] = parse_tool_calls(calls, param + ".tool_calls");
    }
    if (role == "tool") {
      const ojson& id = field(m, "tool_call_id");
      if (!id.is_null() && !id.is_string()) throw wrong_type(param + ".tool_call_id", "a string", id);
      if (id.is_string()) msg["tool_call_id"] = id;
    }
    if (const ojson& name = field(m, "name"); !name.is_null()) {
      if (!name.is_string()) throw wrong_type(param + ".name", "a string", name);
      msg["name"] = name;
    }
    for (const char* key : {"reasoning_content", "reasoning"}) {
      const ojson& r = field(m, key);
      if (!r.is_null() && !r.is_string()) throw wrong_type(param + "." + key, "a string", r);
      if (r.is_string()) msg[key] = r;
    }
    out.push_back(std::move(msg));
  }
  return out;
}

ojson parse_tools(const ojson& doc) {
  const ojson& tools = field(doc, "tools");
  if (tools.is_null()) return nullptr;
  if (!tools.is_array()) throw wrong_type("tools", "an array", tools);
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string param = fmt::format("tools[{}]", i);
    if (!t.is_object()) throw wrong_type(param, "an object", t);
    const ojson& type = field(t, "type");
    if (!type.is_string() || type.get<std::string>() != "function") {
      throw invalid_request(fmt::format("'{}.type' must be \"function\"", param), param + ".type");
    }
    const ojson& fn = field(t, "function");
    if (!fn.is_object()) throw wrong_type(param + ".function", "an object", fn);
    const ojson& name = field(fn, "name");
    if (!name.is_string() || name.get<std::string>().empty()) {
      throw invalid_request(fmt::format("'{}.function.name' must be a non-empty string", param),
                            param + ".function.name");
    }
    const ojson& desc = field(fn, "description");
    if (!desc.is_null() && !desc.is_string()) throw wrong_type(param + ".function.description", "a string", desc);
    const ojson& params = field(fn, "parameters");
    if (!params.is_null() && !params.is_object()) throw wrong_type(param + ".function.parameters", "an object", params);
  }
  return tools.empty() ? ojson(nullptr) : tools;
}

void parse_tool_choice(const ojson& doc, ChatCompletionRequest& r) {
  const ojson& tc = field(doc, "tool_choice");
  if (tc.is_null()) return;
  if (tc.is_string()) {
    const std::string s = tc.get<std::string>();
    if (s == "auto")
      r.tool_choice = ToolChoice::Auto;
    else if (s == "none")
      r.tool_choice = ToolChoice::None;
    else if (s == "required")
      r.tool_choice = ToolChoice::Required;
    else
      throw invalid_request(
          fmt::format("'tool_choice' must be \"none\", \"auto\", \"required\" or an object, got \"{}\"", s),
          "tool_choice");
    return;
  }
  if (!tc.is_object()) throw wrong_type("tool_choice", "a string or an object", tc);
  const ojson& fn = field(tc, "function");
  const ojson& name = fn.is_object() ? field(fn, "name") : fn;
  if (!name.is_string())
    throw invalid_request("'tool_choice.function.name' must be a string", "tool_choice.function.name");
  r.tool_choice = ToolChoice::Function;
  r.tool_choice_function = name.get<std::string>();
}

}  // namespace

ChatCompletionRequest parse_chat_completion_request(std::string_view body, const RequestLimits& limits) {
  const ojson doc = parse_body(body);
  ChatCompletionRequest r;
  r.params = parse_common(doc, limits);
  r.messages = parse_messages(doc, limits);
  r.tools = parse_tools(doc);
  parse_tool_choice(doc, r);
  if (r.tool_choice == ToolChoice::None) r.tools = nullptr;
  if (r.tool_choice == ToolChoice::Function) {
    bool found = false;
    if (r.tools.is_array()) {
      for (const auto& t : r.tools) found = found || t["function"]["name"] == r.tool_choice_function;
    }
    if (!found) {
      throw invalid_request(fmt::format("'tool_choice' names \"{}\", which is not in 'tools'", r.tool_choice_function),
                            "tool_choice");
    }
  }
  if (r.tool_choice == ToolChoice::Required && r.tools.is_null()) {
    throw invalid_request("'tool_choice' is \"required\" but no 'tools' are given", "tool_choice");
  }
  r.parallel_tool_calls = get_bool(doc, "parallel_tool_calls").value_or(true);
  // A forced tool call is itself an output constraint: the answer is tool calls, never content.
  if ((r.tool_choice == ToolChoice::Required || r.tool_choice == ToolChoice::Function) && r.params.grammar) {
    throw invalid_request(fmt::format("'tool_choice' forces a tool call and '{}' constrains the content: only one "
                                      "of them may be given",
                                      r.params.grammar_field),
                          r.params.grammar_field);
  }
  if (const ojson& kw = field(doc, "chat_template_kwargs"); !kw.is_null()) {
    if (!kw.is_object()) throw wrong_type("chat_template_kwargs", "an object", kw);
    r.chat_template_kwargs = kw;
  }
  r.logprobs = get_bool(doc, "logprobs").value_or(false);
  if (auto top = get_int(doc, "top_logprobs", 0, limits.max_top_logprobs)) {
    if (!r.logprobs) throw invalid_request("'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
    r.top_logprobs = static_cast<int>(*top);
  }
  return r;
}

CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits) {
  const ojson doc = parse_body(body);
  CompletionRequest r;
  r.params = parse_common(doc, limits);
  const ojson* prompt = &field(doc, "prompt");
  if (prompt->is_null()) throw invalid_request("'prompt' is required", "prompt");
  // One prompt per request: a list holding one string or one token list is unwrapped.
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    prompt = &(*prompt)[0];
  } else if (prompt->is_array() && !prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    throw invalid_request(fmt::format("'prompt' holds {} prompts: one prompt per request is supported", prompt->size()),
                          "prompt");
  }
  if (prompt->is_string()) {
    r.prompt = prompt->get<std::string>();
  } else if (prompt->is_array()) {
    if (prompt->empty()) throw invalid_request("'prompt' must not be empty", "prompt");
    std::vector<int32_t> ids;
    ids.reserve(prompt->size());
    for (size_t i = 0; i < prompt->size(); ++i)
      ids.push_back(token_id((*prompt)[i], fmt::format("prompt[{}]", i), limits));
    r.prompt_tokens = std::move(ids);
  } else {
    throw wrong_type("prompt", "a string, an array of token ids, or a one-element array of either", *prompt);
  }
  if (auto lp = get_int(doc, "logprobs", 0, limits.max_top_logprobs)) r.logprobs = static_cast<int>(*lp);
  if (get_bool(doc, "echo").value_or(false)) throw invalid_request("'echo' is not supported", "echo");
  if (const ojson& suffix = field(doc, "suffix"); !suffix.is_null()) {
    throw invalid_request("'suffix' is not supported", "suffix");
  }
  return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body, const RequestLimits& limits) {
  const ojson doc = parse_body(body);
  TokenizeRequest r;
  r.add_special_tokens = get_bool(doc, "add_special_tokens").value_or(true);
  if (!field(doc, "messages").is_null()) {
    r.chat = parse_chat_completion_request(body, limits);
  } else {
    r.prompt = get_string(doc, "prompt");
    if (!r.prompt) throw invalid_request("'prompt' (a string) or 'messages' is required", "prompt");
  }
  return r;
}

std::vector<int32_t> parse_detokenize_request(std::string_view body, const RequestLimits& limits) {
  const ojson doc = parse_body(body);
  const ojson& tokens = field(doc, "tokens");
  if (tokens.is_null()) throw invalid_request("'tokens' is required", "tokens");
  if (!tokens.is_array()) throw wrong_type("tokens", "an array of token ids", tokens);
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ids.push_back(token_id(tokens[i], fmt::format("tokens[{}]", i), limits));
  return ids;
}

}  // namespace specula::server
