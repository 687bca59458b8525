// Cost of constrained decoding's per-step token mask on the real Gemma 4 vocabulary (262 144
// tokens), against the unmasked logits pipeline step it is added to:
//   BM_MaskJsonDocument: a JSON document generated token by token (mask + advance per token,
//                        one masker for the document: the steady-state cost of a generation)
//   BM_MaskColdState/*:  one mask from a fresh masker (automaton built from nothing) at
//                        the start of an object, inside a string key, inside a number
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
#include "specula/sample/logits_pipeline.h"
#include "specula/text/tokenizer.h"

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

std::shared_ptr<const grammar::Grammar> schema_grammar() {
  static const auto g = std::make_shared<const grammar::Grammar>(
      grammar::grammar_from_json_schema(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
        "name": {"type": "string"}, "city": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "scores": {"type": "array", "items": {"type": "number"}}},
        "required": ["name", "city", "tags", "age", "scores"], "additionalProperties": false})")));
  return g;
}

const char* kDocument =
    R"({"name": "Zoë Müller-Øberg 中文", "city": "São Paulo, a city with a long name", "tags": ["red", "blue"],)"
    R"( "age": 42, "scores": [3.25, -1.5, 1000.125, 7]})";

void BM_MaskJsonDocument(benchmark::State& state) {
  const std::vector<int32_t> tokens = tokenizer().encode(kDocument, false);
  for (auto _ : state) {
    grammar::TokenMasker masker(schema_grammar(), trie(), trie()->vocab_size(), {1});
    grammar::GrammarMatcher m(schema_grammar());
    for (const int32_t t : tokens) {
      benchmark::DoNotOptimize(masker.mask(m).data());
      if (!masker.accept_token(m, t)) state.SkipWithError("the document does not match the schema");
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tokens.size()));
  state.counters["tokens"] = static_cast<double>(tokens.size());
}
BENCHMARK(BM_MaskJsonDocument)->Unit(benchmark::kMillisecond);

void BM_MaskColdState(benchmark::State& state) {
  const char* prefixes[] = {"", "{\"name\": \"Zo", "{\"name\": \"a\", \"city\": \"b\", \"tags\": [], \"age\": 4"};
  grammar::GrammarMatcher m(schema_grammar());
  if (!m.accept_bytes(prefixes[state.range(0)])) state.SkipWithError("prefix rejected");
  for (auto _ : state) {
    grammar::TokenMasker masker(schema_grammar(), trie(), trie()->vocab_size(), {1});
    benchmark::DoNotOptimize(masker.mask(m).data());
  }
  state.counters["trie_nodes"] = static_cast<double>(trie()->node_count());
}
BENCHMARK(BM_MaskColdState)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

std::vector<float> random_logits() {
  std::vector<float> x(trie()->vocab_size());  // the model's vocabulary (262 144)
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (float& v : x) v = d(rng);
  return x;
}

void BM_Greedy(benchmark::State& state) {
  const std::vector<float> logits = random_logits();
  SamplingParams p;
  p.temperature = 0.0;
  const std::vector<int32_t> history{2};
  for (auto _ : state) benchmark::DoNotOptimize(build_distribution(logits, {history, 1}, p).p.argmax());
}
BENCHMARK(BM_Greedy)->Unit(benchmark::kMillisecond);

void BM_GreedyMasked(benchmark::State& state) {
  const std::vector<float> logits = random_logits();
  SamplingParams p;
  p.temperature = 0.0;
  const std::vector<int32_t> history{2};
  grammar::TokenMasker masker(schema_grammar(), trie(), trie()->vocab_size(), {1});
  grammar::GrammarMatcher m(schema_grammar());
  (void)m.accept_bytes("{\"name\": \"Zo");  // inside a string: most tokens allowed
  const std::vector<uint64_t> mask(masker.mask(m).begin(), masker.mask(m).end());
  for (auto _ : state) benchmark::DoNotOptimize(build_distribution(logits, {history, 1}, p, mask).p.argmax());
}
BENCHMARK(BM_GreedyMasked)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
