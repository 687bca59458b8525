// Cost of constrained decoding's per-step token mask on the real Gemma 4 vocabulary (262 144
// tokens), for three grammars (a JSON Schema with nested objects, arrays and enums; any JSON object;
// a Gemma tool call) at realistic states (the start, between keys, inside a string, inside a number):
//   BM_MaskCold/G/S:     the mask of state S of grammar G from a fresh masker (the automaton built
//                        from nothing): what the first step of a generation pays
//   BM_MaskWarm/G/S:     the mask of S computed afresh (no per-state mask cache) by a masker that
//                        already generated a whole document of G: a state met for the first time
//                        in the middle of a generation
//   BM_MaskDocument/G:   a document of G generated token by token (mask + advance per token, one
//                        masker for the document): the steady-state cost per token (items/s)
//   BM_Greedy[Masked]:   the greedy logits pipeline over 262 144 logits without / with a mask
// Override the tokenizer with SPECULA_TOKENIZER=path/to/tokenizer.json.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "specula/engine/token_vocabulary.h"
#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/json_schema.h"
#include "specula/grammar/token_mask.h"
#include "specula/grammar/tool_call_grammar.h"
#include "specula/sample/logits_pipeline.h"
#include "specula/text/tokenizer.h"
#include "specula/text/tool_calls.h"

namespace {

using namespace specula;

std::string tokenizer_path() {
  if (const char* env = std::getenv("SPECULA_TOKENIZER")) return env;
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / "tests" / "data" / "tokenizer-gemma4" /
          "tokenizer.json")
      .string();
}

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer tok = text::Tokenizer::load(tokenizer_path());
  return tok;
}

std::shared_ptr<const grammar::TokenTrie> trie() {
  static const auto t = build_token_vocabulary(tokenizer(), INT64_MAX);
  return t;
}

int32_t special(std::string_view text) {
  const auto id = tokenizer().token_to_id(text);
  if (!id) std::abort();
  return *id;
}

// A document in pieces: text (tokenized) and special tokens (by id), so that grammars with token
// terminals (tool calls) can be walked.
struct Piece {
  std::string text;
  int32_t token = -1;
};

std::vector<int32_t> tokens_of(const std::vector<Piece>& pieces) {
  std::vector<int32_t> out;
  for (const Piece& p : pieces) {
    if (p.token >= 0) {
      out.push_back(p.token);
      continue;
    }
    const std::vector<int32_t> t = tokenizer().encode(p.text, false);
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

struct State {
  const char* name;
  std::vector<Piece> prefix;
};

struct Case {
  const char* name;
  std::shared_ptr<const grammar::Grammar> grammar;
  std::vector<Piece> document;
  std::vector<State> states;
};

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"},
  "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
              "required": ["city"]},
  "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}},
  "age": {"type": "integer", "minimum": 0, "maximum": 150},
  "scores": {"type": "array", "items": {"type": "number"}},
  "friends": {"type": "array", "items": {"type": "object", "properties": {
      "name": {"type": "string"}, "since": {"type": "integer"}}, "required": ["name"]}}},
  "required": ["name", "address", "tags", "age", "scores", "friends"], "additionalProperties": false})";

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
  "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
  "properties": {"query": {"type": "string"}}, "required": ["query"]}}}])";

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  cases.push_back({"schema",
                   std::make_shared<const grammar::Grammar>(
                       grammar::grammar_from_json_schema(nlohmann::ordered_json::parse(kSchema))),
                   {{R"({"name": "Zoë Müller-Øberg 中文", "address": {"city": "São Paulo", "zip": "01000-000"}, )"
                     R"("tags": ["red", "blue"], "age": 42, "scores": [3.25, -1.5, 1000.125, 7], )"
                     R"("friends": [{"name": "Ann", "since": 2019}, {"name": "Bo"}]})"}},
                   {{"start", {}},
                    {"between_keys", {{R"({"name": "a", )"}}},
                    {"in_string", {{R"({"name": "Zo)"}}},
                    {"in_number", {{R"({"name": "a", "address": {"city": "b"}, "tags": [], "age": 4)"}}},
                    {"in_enum", {{R"({"name": "a", "address": {"city": "b"}, "tags": ["gr)"}}}}});
  cases.push_back({"json_object",
                   std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(grammar::json_object_gbnf())),
                   {{R"({"title": "Ein Bericht über Zürich", "year": 2024, "ratio": -0.125, )"
                     R"("items": [{"id": 1, "ok": true}, {"id": 2, "ok": null}], "note": "日本語 text"})"}},
                   {{"start", {}},
                    {"between_keys", {{R"({"a": 1, )"}}},
                    {"in_string", {{R"({"a": "Zo)"}}},
                    {"in_number", {{R"({"a": 12)"}}}}});
  const grammar::ToolCallTokens tt{special(text::kToolCallBegin), special(text::kToolCallEnd),
                                   special(text::kToolStringDelimiter)};
  const int32_t q = tt.string_delimiter;
  cases.push_back(
      {"tool_call",
       std::make_shared<const grammar::Grammar>(
           grammar::tool_call_grammar(nlohmann::ordered_json::parse(kTools), {}, tt)),
       {{"", tt.call_begin},
        {"call:get_weather{city:"},
        {"", q},
        {"Saint-Étienne"},
        {"", q},
        {",days:12,unit:"},
        {"", q},
        {"celsius"},
        {"", q},
        {"}"},
        {"", tt.call_end}},
       {{"start", {}},
        {"function_name", {{"", tt.call_begin}, {"call:"}}},
        {"between_keys", {{"", tt.call_begin}, {"call:get_weather{city:"}, {"", q}, {"x"}, {"", q}, {","}}},
        {"in_string", {{"", tt.call_begin}, {"call:get_weather{city:"}, {"", q}, {"Sai"}}},
        {"in_number", {{"", tt.call_begin}, {"call:get_weather{city:"}, {"", q}, {"x"}, {"", q}, {",days:1"}}}}});
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = make_cases();
  return c;
}

std::unique_ptr<grammar::TokenMasker> new_masker(const Case& c) {
  return std::make_unique<grammar::TokenMasker>(c.grammar, trie(), trie()->vocab_size(), std::vector<int32_t>{1});
}

// The matcher after `tokens`; aborts the benchmark when the grammar rejects one.
grammar::GrammarMatcher state_after(benchmark::State& bm, const Case& c, const std::vector<int32_t>& tokens) {
  grammar::GrammarMatcher m(c.grammar);
  grammar::TokenMasker masker = *new_masker(c);
  for (const int32_t t : tokens)
    if (!masker.accept_token(m, t)) bm.SkipWithError("the prefix does not match the grammar");
  return m;
}

void count_allowed(benchmark::State& bm, std::span<const uint64_t> mask) {
  size_t n = 0;
  for (const uint64_t w : mask) n += static_cast<size_t>(__builtin_popcountll(w));
  bm.counters["allowed"] = static_cast<double>(n);
}

void BM_MaskCold(benchmark::State& bm, size_t c, size_t s) {
  const Case& k = cases()[c];
  const grammar::GrammarMatcher m = state_after(bm, k, tokens_of(k.states[s].prefix));
  std::vector<uint64_t> bits;
  for (auto _ : bm) {
    auto masker = new_masker(k);
    masker->compute_mask(m, bits);
    benchmark::DoNotOptimize(bits.data());
    bm.counters["states"] = static_cast<double>(masker->automaton_states());
  }
  count_allowed(bm, bits);
  bm.counters["trie_nodes"] = static_cast<double>(trie()->node_count());
}

void BM_MaskWarm(benchmark::State& bm, size_t c, size_t s) {
  const Case& k = cases()[c];
  const grammar::GrammarMatcher m = state_after(bm, k, tokens_of(k.states[s].prefix));
  auto masker = new_masker(k);
  grammar::GrammarMatcher doc(k.grammar);
  for (const int32_t t : tokens_of(k.document)) {
    (void)masker->mask(doc);
    if (!masker->accept_token(doc, t)) bm.SkipWithError("the document does not match the grammar");
  }
  std::vector<uint64_t> bits;
  masker->compute_mask(m, bits);  // the state's own transitions, as the step after it would have them
  for (auto _ : bm) {
    masker->compute_mask(m, bits);
    benchmark::DoNotOptimize(bits.data());
  }
  count_allowed(bm, bits);
}

void BM_MaskDocument(benchmark::State& bm, size_t c) {
  const Case& k = cases()[c];
  const std::vector<int32_t> tokens = tokens_of(k.document);
  for (auto _ : bm) {
    auto masker = new_masker(k);
    grammar::GrammarMatcher m(k.grammar);
    for (const int32_t t : tokens) {
      benchmark::DoNotOptimize(masker->mask(m).data());
      if (!masker->accept_token(m, t)) bm.SkipWithError("the document does not match the grammar");
    }
  }
  bm.SetItemsProcessed(bm.iterations() * static_cast<int64_t>(tokens.size()));
  bm.counters["tokens"] = static_cast<double>(tokens.size());
}

std::vector<float> random_logits() {
  std::vector<float> x(trie()->vocab_size());  // the model's vocabulary (262 144)
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (float& v : x) v = d(rng);
  return x;
}

void BM_Greedy(benchmark::State& bm) {
  const std::vector<float> logits = random_logits();
  SamplingParams p;
  p.temperature = 0.0;
  const std::vector<int32_t> history{2};
  for (auto _ : bm) benchmark::DoNotOptimize(build_distribution(logits, {history, 1}, p).p.argmax());
}
BENCHMARK(BM_Greedy)->Unit(benchmark::kMillisecond);

void BM_GreedyMasked(benchmark::State& bm) {
  const std::vector<float> logits = random_logits();
  SamplingParams p;
  p.temperature = 0.0;
  const std::vector<int32_t> history{2};
  const Case& k = cases()[0];
  const grammar::GrammarMatcher m = state_after(bm, k, tokens_of(k.states[2].prefix));  // inside a string
  std::vector<uint64_t> mask;
  new_masker(k)->compute_mask(m, mask);
  for (auto _ : bm) benchmark::DoNotOptimize(build_distribution(logits, {history, 1}, p, mask).p.argmax());
}
BENCHMARK(BM_GreedyMasked)->Unit(benchmark::kMillisecond);

const bool registered = [] {
  for (size_t c = 0; c < cases().size(); ++c) {
    const std::string g = cases()[c].name;
    benchmark::RegisterBenchmark(("BM_MaskDocument/" + g).c_str(), BM_MaskDocument, c)->Unit(benchmark::kMillisecond);
    for (size_t s = 0; s < cases()[c].states.size(); ++s) {
      const std::string name = g + "/" + cases()[c].states[s].name;
      benchmark::RegisterBenchmark(("BM_MaskCold/" + name).c_str(), BM_MaskCold, c, s)->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("BM_MaskWarm/" + name).c_str(), BM_MaskWarm, c, s)->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
