// Tokenizer throughput on the Gemma 4 test tokenizer: loading tokenizer.json, encoding (word cache
// off and on) and decoding the texts of encode-goldens.jsonl (prose, code, many scripts).
// Override the tokenizer with SPECULA_TOKENIZER=path/to/tokenizer.json.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "specula/text/tokenizer.h"

namespace {

using specula::text::Tokenizer;

std::filesystem::path data_dir() {
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "tests" / "data" / "tokenizer-gemma4";
}

std::string tokenizer_path() {
  if (const char* env = std::getenv("SPECULA_TOKENIZER")) return env;
  return (data_dir() / "tokenizer.json").string();
}

// All golden texts joined by newlines (about 89 KB).
const std::string& corpus() {
  static const std::string text = [] {
    std::ifstream in(data_dir() / "encode-goldens.jsonl");
    std::string line, all;
    while (std::getline(in, line)) {
      if (!line.empty()) all += nlohmann::json::parse(line).at("text").get<std::string>() + "\n";
    }
    return all;
  }();
  return text;
}

Tokenizer& tokenizer() {
  static Tokenizer tok = Tokenizer::load(tokenizer_path());
  return tok;
}

void BM_Load(benchmark::State& state) {
  for (auto _ : state) {
    Tokenizer tok = Tokenizer::load(tokenizer_path());
    benchmark::DoNotOptimize(tok.vocab_size());
  }
}
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_Encode(benchmark::State& state) {
  Tokenizer& tok = tokenizer();
  tok.set_cache_capacity(state.range(0));
  const std::string& text = corpus();
  size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK(BM_Encode)->Arg(0)->Arg(10000)->ArgName("cache")->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  Tokenizer& tok = tokenizer();
  const auto ids = tok.encode(corpus(), false);
  for (auto _ : state) {
    const std::string text = tok.decode(ids, false);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus().size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
