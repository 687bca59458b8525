// The engine (engine/engine.h): one generation path for plain and speculative decoding, the prompt
// cache and the streamed text. On the tiny golden models (window 4, no tokenizer) the engine's
// tokens equal generate_greedy's, speculative (drafter and lookup) equals plain, seeded sampling
// reproduces, and a warm prompt cache — reused, rolled back, reset, far past the sliding window —
// gives the same tokens as a cold engine; logprobs equal an independent log-softmax of the
// model's logits. On a synthetic checkpoint carrying the Gemma 4 tokenizer, the streamed text
// equals the decoded tokens and stop strings cut it exactly. Errors leave the engine usable.
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared_checkpoint.h"
#include "spec_golden_util.h"
#include "specula/engine/engine.h"
#include "specula/model/generate.h"
#include "specula/model/target_model.h"
#include "specula/sample/rng.h"
#include "specula/sample/sampler.h"
#include "specula/text/tokenizer.h"
#include "specula/util/error.h"
#include "specula/util/thread_pool.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = spec_test::golden_root() / "dense-q5g64-window4";  // sliding window 4, vocab 512

std::vector<int32_t> golden_prompt() {
  std::ifstream in(kGolden / "expected.json");
  return nlohmann::json::parse(in).at("prompt").get<std::vector<int32_t>>();
}

// A prompt of `n` tokens: the golden prompt repeated (after its BOS).
std::vector<int32_t> long_prompt(size_t n) {
  const std::vector<int32_t> base = golden_prompt();
  std::vector<int32_t> p = base;
  while (p.size() < n) p.insert(p.end(), base.begin() + 1, base.end());
  p.resize(n);
  return p;
}

std::unique_ptr<Engine> load_engine(const std::string& draft = "", bool prompt_cache = true,
                                    int64_t prefill_chunk = 512, int64_t max_context = 0,
                                    const std::string& gamma = "auto") {
  EngineOptions o;
  o.model_dir = (kGolden / "model").string();
  o.draft = draft == "drafter" ? (kGolden / "drafter").string() : draft;
  o.prompt_cache = prompt_cache;
  o.prefill_chunk = prefill_chunk;
  o.max_context = max_context;
  o.gamma = gamma;
  o.threads = 1;
  o.precision = Precision::Exact;
  return Engine::load(o);
}

GenerationRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0;
  return r;
}

std::vector<int32_t> reference_greedy(const std::vector<int32_t>& prompt, int64_t max_tokens) {
  TargetOptions to;
  to.precision = Precision::Exact;
  auto model = TargetModel::load((kGolden / "model").string(), to);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  GenerateOptions g;
  g.max_tokens = max_tokens;
  g.ignore_eos = true;
  return generate_greedy(*model, cache, prompt, g, pool).tokens;
}

TEST(Engine, PlainGreedyEqualsGenerateGreedy) {
  auto engine = load_engine();
  const std::vector<int32_t> prompt = golden_prompt();
  const GenerationResult r = engine->generate(greedy_request(prompt, 40));
  EXPECT_EQ(r.tokens, reference_greedy(prompt, 40));
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.stats.prompt_tokens, static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(r.stats.completion_tokens, 40);
  EXPECT_EQ(r.stats.drafted, 0);
  EXPECT_EQ(r.stats.target_calls, 40);  // the prefill, then one forward per further token
  EXPECT_EQ(engine->draft_description(), "none");
  EXPECT_EQ(engine->model_name(), "model");
}

TEST(Engine, SpeculativeDrafterAndLookupEqualPlainAtTemperatureZero) {
  const std::vector<int32_t> prompt = long_prompt(30);
  const std::vector<int32_t> ref = reference_greedy(prompt, 48);
  for (const std::string draft : {"drafter", "lookup"}) {
    for (const std::string gamma : {"auto", "3"}) {
      auto engine = load_engine(draft, /*prompt_cache=*/false, 512, 0, gamma);
      const GenerationResult spec = engine->generate(greedy_request(prompt, 48));
      EXPECT_EQ(spec.tokens, ref) << draft << " gamma " << gamma;
      EXPECT_GT(spec.stats.drafted, 0) << draft;
      if (draft == "drafter") {
        EXPECT_LT(spec.stats.target_calls, 48) << "the golden drafter accepts some drafts";
      }
      GenerationRequest plain_req = greedy_request(prompt, 48);
      plain_req.speculative = false;
      const GenerationResult plain = engine->generate(plain_req);
      EXPECT_EQ(plain.tokens, ref) << draft;
      EXPECT_EQ(plain.stats.drafted, 0);
    }
  }
}

// Plain sampling through the engine (the verify loop without drafts) draws exactly what a
// step-by-step sampler draws: forward, sample_token on the verifier's stream (0) of the seed.
TEST(Engine, PlainSamplingEqualsAStepByStepSampler) {
  const std::vector<int32_t> prompt = golden_prompt();
  SamplingParams p;
  p.temperature = 0.8;
  p.top_k = 50;
  p.top_p = 0.9;
  p.repetition_penalty = 1.2;
  p.presence_penalty = 0.5;
  p.seed = 11;
  TargetOptions to;
  to.precision = Precision::Exact;
  auto model = TargetModel::load((kGolden / "model").string(), to);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  std::vector<int32_t> context = prompt;
  Rng rng(p.seed, 0);
  ForwardOutput out = model->forward(cache, prompt, ForwardRequest{}, pool);
  for (int i = 0; i < 24; ++i) {
    const std::span<const float> logits(out.logits_row(0), static_cast<size_t>(out.vocab_size));
    const int32_t t = sample_token(logits, TokenHistory{context, prompt.size()}, p, rng).id;
    context.push_back(t);
    out = model->forward(cache, std::span<const int32_t>(&context.back(), 1), ForwardRequest{}, pool);
  }
  GenerationRequest req = greedy_request(prompt, 24);
  req.sampling = p;
  const GenerationResult r = load_engine("drafter")->generate([&] {
    GenerationRequest plain = req;
    plain.speculative = false;
    return plain;
  }());
  EXPECT_EQ(r.tokens, std::vector<int32_t>(context.begin() + static_cast<ptrdiff_t>(prompt.size()), context.end()));
}

// (With gamma "auto" the draft lengths follow measured timings, so the draws — lossless in
// distribution — are reproducible only for a fixed gamma.)
TEST(Engine, SeededSamplingReproducesAndMatchesAColdEngine) {
  auto engine = load_engine("drafter", true, 512, 0, /*gamma=*/"3");
  GenerationRequest r = greedy_request(golden_prompt(), 32);
  r.sampling.temperature = 1.0;
  r.sampling.top_k = 40;
  r.sampling.seed = 7;
  const GenerationResult a = engine->generate(r);
  const GenerationResult b = engine->generate(r);  // warm prompt cache
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_GT(b.stats.cached_tokens, 0);
  r.speculative = false;
  const GenerationResult plain1 = engine->generate(r);
  const GenerationResult plain2 = load_engine()->generate(r);
  EXPECT_EQ(plain1.tokens, plain2.tokens);
  r.sampling.seed = 8;
  EXPECT_NE(load_engine()->generate(r).tokens, plain2.tokens);
}

// Turn 2 extends turn 1's prompt and answer: only the new part is prefilled, the tokens equal a
// cold engine's.
TEST(Engine, PromptCacheReusedAcrossTurnsGivesTheColdTokens) {
  for (const std::string draft : {"", "drafter"}) {
    auto engine = load_engine(draft);
    auto cold = load_engine(draft, /*prompt_cache=*/false);
    const std::vector<int32_t> p1 = long_prompt(20);
    const GenerationResult t1 = engine->generate(greedy_request(p1, 12));
    EXPECT_EQ(t1.stats.cached_tokens, 0);
    EXPECT_GE(engine->cached_tokens(), static_cast<int64_t>(p1.size() + t1.tokens.size() - 1));

    std::vector<int32_t> p2 = p1;
    p2.insert(p2.end(), t1.tokens.begin(), t1.tokens.end());
    for (int32_t t : {106, 5, 77, 300, 12}) p2.push_back(t);
    const GenerationResult t2 = engine->generate(greedy_request(p2, 12));
    // The cache holds every answer token but the last (never fed), or more when accepted drafts ran past it.
    EXPECT_GE(t2.stats.cached_tokens, static_cast<int64_t>(p1.size() + t1.tokens.size()) - 1) << draft;
    EXPECT_LE(t2.stats.cached_tokens, static_cast<int64_t>(p1.size() + t1.tokens.size())) << draft;
    EXPECT_EQ(t2.tokens, cold->generate(greedy_request(p2, 12)).tokens) << draft;

    // The identical prompt again: everything but the last token is reused.
    const GenerationResult again = engine->generate(greedy_request(p2, 12));
    EXPECT_EQ(again.stats.cached_tokens, static_cast<int64_t>(p2.size()) - 1);
    EXPECT_EQ(again.tokens, t2.tokens);
  }
}

TEST(Engine, DivergingPromptRollsBackOrResets) {
  const std::vector<int32_t> p1 = long_prompt(40);
  std::vector<int32_t> p2(p1.begin(), p1.begin() + 6);
  for (int32_t t : {9, 8, 7, 6, 5, 4, 3}) p2.push_back(t);
  const std::vector<int32_t> ref = reference_greedy(p2, 10);

  // Rollback path: the rings hold W + 511 positions (prefill chunk 512), enough to go back to 6.
  auto roomy = load_engine("drafter");
  roomy->generate(greedy_request(p1, 10));
  const GenerationResult r1 = roomy->generate(greedy_request(p2, 10));
  EXPECT_EQ(r1.stats.cached_tokens, 6);
  EXPECT_EQ(r1.tokens, ref);

  // Reset path: prefill chunk 4 leaves a rollback reserve of 16, far less than 40 + 10 - 6.
  auto tight = load_engine("drafter", true, /*prefill_chunk=*/4);
  tight->generate(greedy_request(p1, 10));
  const GenerationResult r2 = tight->generate(greedy_request(p2, 10));
  EXPECT_EQ(r2.stats.cached_tokens, 0);
  EXPECT_EQ(r2.tokens, ref);
}

// Many windows of context, a warm cache continued several times, each continuation compared
// with a cold run (the drafter reads the sliding-window rings of the warm cache).
TEST(Engine, PromptCacheReusePastTheSlidingWindow) {
  auto engine = load_engine("drafter", true, /*prefill_chunk=*/8);
  auto cold = load_engine("drafter", false, 8);
  std::vector<int32_t> prompt = long_prompt(30);
  for (int turn = 0; turn < 3; ++turn) {
    const GenerationResult warm = engine->generate(greedy_request(prompt, 16));
    EXPECT_EQ(warm.tokens, cold->generate(greedy_request(prompt, 16)).tokens) << "turn " << turn;
    if (turn > 0) {
      EXPECT_GT(warm.stats.cached_tokens, 4 * 8) << "turn " << turn;
    }
    prompt.insert(prompt.end(), warm.tokens.begin(), warm.tokens.end());
    prompt.push_back(static_cast<int32_t>(100 + turn));
  }
}

TEST(Engine, CancelFromTheCallbackKeepsTheEngineUsable) {
  auto engine = load_engine("drafter");
  const std::vector<int32_t> prompt = golden_prompt();
  int events = 0;
  size_t streamed = 0;
  const GenerationResult r = engine->generate(greedy_request(prompt, 100), [&](const GenerationEvent& ev) {
    streamed += ev.tokens.size();
    return ++events < 2;
  });
  EXPECT_EQ(r.finish_reason, "cancelled");
  EXPECT_EQ(events, 2);
  EXPECT_EQ(streamed, r.tokens.size());
  EXPECT_LT(r.tokens.size(), 100u);
  const std::vector<int32_t> ref = reference_greedy(prompt, 100);
  EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), ref.begin()));
  EXPECT_EQ(engine->generate(greedy_request(prompt, 100)).tokens, ref);
}

TEST(Engine, LogprobsAreTheLogSoftmaxOfTheModelsLogits) {
  const std::vector<int32_t> prompt = golden_prompt();
  TargetOptions to;
  to.precision = Precision::Exact;
  auto model = TargetModel::load((kGolden / "model").string(), to);
  for (const std::string draft : {"", "drafter"}) {
    auto engine = load_engine(draft);
    GenerationRequest req = greedy_request(prompt, 12);
    req.top_logprobs = 5;
    std::vector<TokenLogprobs> streamed;
    const GenerationResult r = engine->generate(req, [&](const GenerationEvent& ev) {
      EXPECT_EQ(ev.logprobs.size(), ev.tokens.size());
      streamed.insert(streamed.end(), ev.logprobs.begin(), ev.logprobs.end());
      return true;
    });
    ASSERT_EQ(r.logprobs.size(), r.tokens.size());
    ASSERT_EQ(streamed.size(), r.tokens.size());

    // Independently: one forward over prompt + tokens, log-softmax of each row in double.
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), r.tokens.begin(), r.tokens.end());
    ThreadPool pool(1);
    TargetCache cache = model->new_cache();
    ForwardRequest fr;
    fr.rows = OutputRows::All;
    const ForwardOutput out = model->forward(cache, all, fr, pool);
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      const float* row = out.logits_row(prompt.size() - 1 + i);
      double max = -INFINITY;
      for (int64_t v = 0; v < out.vocab_size; ++v) max = std::max(max, static_cast<double>(row[v]));
      double sum = 0;
      for (int64_t v = 0; v < out.vocab_size; ++v) sum += std::exp(row[v] - max);
      const double log_z = max + std::log(sum);
      const TokenLogprobs& lp = r.logprobs[i];
      EXPECT_EQ(lp.chosen.id, r.tokens[i]);
      EXPECT_NEAR(lp.chosen.logprob, row[r.tokens[i]] - log_z, 1e-9) << draft << " token " << i;
      ASSERT_EQ(lp.top.size(), 5u);
      EXPECT_EQ(lp.top[0].id, r.tokens[i]);  // greedy picks the most likely token
      double mass = 0;
      for (size_t k = 0; k < lp.top.size(); ++k) {
        EXPECT_NEAR(lp.top[k].logprob, row[lp.top[k].id] - log_z, 1e-9);
        if (k > 0) {
          EXPECT_TRUE(lp.top[k - 1].logprob > lp.top[k].logprob ||
                      (lp.top[k - 1].logprob == lp.top[k].logprob && lp.top[k - 1].id < lp.top[k].id));
        }
        mass += std::exp(lp.top[k].logprob);
      }
      EXPECT_LE(mass, 1.0 + 1e-9);
      EXPECT_EQ(streamed[i].chosen.id, lp.chosen.id);
      EXPECT_EQ(streamed[i].chosen.logprob, lp.chosen.logprob);
    }
  }
}

TEST(Engine, InvalidRequestsThrowAndLeaveTheEngineUsable) {
  auto engine = load_engine("drafter", true, 512, /*max_context=*/64);
  const std::vector<int32_t> prompt = golden_prompt();
  const std::vector<int32_t> ref = reference_greedy(prompt, 10);
  engine->generate(greedy_request(prompt, 10));  // warms the prompt cache

  EXPECT_THROW(engine->generate(greedy_request({}, 10)), Error);
  try {
    engine->generate(greedy_request(long_prompt(64), 10));
    ADD_FAILURE() << "a prompt filling the whole context was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(engine->generate(greedy_request({2, 5, 512}, 10)), Error);  // id outside the vocabulary
  GenerationRequest bad_gamma = greedy_request(prompt, 10);
  bad_gamma.gamma = GammaChoice{false, 1000, 8};
  EXPECT_THROW(engine->generate(bad_gamma), Error);
  GenerationRequest bad_sampling = greedy_request(prompt, 10);
  bad_sampling.sampling.top_p = 0.0;
  EXPECT_THROW(engine->generate(bad_sampling), Error);
  GenerationRequest stop_without_tokenizer = greedy_request(prompt, 10);
  stop_without_tokenizer.stop = {"x"};
  EXPECT_THROW(engine->generate(stop_without_tokenizer), Error);
  EXPECT_GT(engine->cached_tokens(), 0);  // rejected before any work: the prompt cache is intact

  // An exception from the callback mid-generation: the prompt cache is dropped, the engine works.
  EXPECT_THROW(engine->generate(greedy_request(prompt, 10),
                                [](const GenerationEvent&) -> bool { throw std::runtime_error("callback"); }),
               std::runtime_error);
  EXPECT_EQ(engine->cached_tokens(), 0);
  // A nested generate() from the callback is refused; the outer one completes.
  bool nested_refused = false;
  const GenerationResult r = engine->generate(greedy_request(prompt, 10), [&](const GenerationEvent&) {
    try {
      engine->generate(greedy_request(prompt, 1));
    } catch (const Error&) {
      nested_refused = true;
    }
    return true;
  });
  EXPECT_TRUE(nested_refused);
  EXPECT_EQ(r.tokens, ref);
  EXPECT_EQ(engine->generate(greedy_request(prompt, 10)).tokens, ref);
  // The context limit ends generation with "length".
  const GenerationResult full = engine->generate(greedy_request(long_prompt(60), 10));
  EXPECT_EQ(full.finish_reason, "length");
  EXPECT_EQ(full.tokens.size(), 5u);  // the first from the prefill, four more fill positions 60..63
}

TEST(Engine, TextHelpersNeedATokenizer) {
  auto engine = load_engine();
  EXPECT_EQ(engine->tokenizer(), nullptr);
  EXPECT_THROW(engine->encode("hi", true), Error);
  EXPECT_THROW(engine->render_chat(nlohmann::ordered_json::array()), Error);
}

// ---- text: a synthetic checkpoint carrying the Gemma 4 tokenizer ----

class EngineText : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions eo;
    eo.model_dir = test::shared_text_pair().model;
    eo.draft = test::shared_text_pair().drafter;
    eo.threads = 1;
    eo.precision = Precision::Exact;
    engine_ = Engine::load(eo).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }

  static std::vector<int32_t> chat_prompt(const std::string& text) {
    return engine_->encode_chat(nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}}));
  }

  static Engine* engine_;
};

Engine* EngineText::engine_ = nullptr;

TEST_F(EngineText, StreamedTextIsTheDecodedTokens) {
  ASSERT_NE(engine_->tokenizer(), nullptr);
  ASSERT_NE(engine_->chat_template(), nullptr);
  const std::vector<int32_t> prompt = chat_prompt("Count to five");
  EXPECT_EQ(prompt.front(), 2);
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), 2), 1);
  for (bool speculative : {false, true}) {
    GenerationRequest req = greedy_request(prompt, 24);
    req.speculative = speculative;
    std::string streamed;
    std::vector<int32_t> streamed_tokens;
    const GenerationResult r = engine_->generate(req, [&](const GenerationEvent& ev) {
      streamed += ev.text;
      streamed_tokens.insert(streamed_tokens.end(), ev.tokens.begin(), ev.tokens.end());
      return true;
    });
    ASSERT_EQ(r.tokens.size(), 24u);
    EXPECT_EQ(streamed_tokens, r.tokens);
    EXPECT_EQ(streamed, r.text);
    EXPECT_EQ(r.text, engine_->decode(r.tokens, /*skip_special_tokens=*/true)) << speculative;
  }
}

TEST_F(EngineText, StopStringCutsTheTextAndEndsGeneration) {
  const std::vector<int32_t> prompt = chat_prompt("Tell me a story");
  GenerationRequest req = greedy_request(prompt, 24);
  const GenerationResult full = engine_->generate(req);
  ASSERT_EQ(full.tokens.size(), 24u);
  // A stop string made of the text of tokens 6 and 7: generation must end at (or before) token 7.
  const std::string stop = engine_->decode({full.tokens[6], full.tokens[7]}, true);
  ASSERT_FALSE(stop.empty());
  const size_t at = full.text.find(stop);
  ASSERT_NE(at, std::string::npos);
  for (bool speculative : {false, true}) {
    req.speculative = speculative;
    req.stop = {"never appears \x01", stop};
    std::string streamed;
    const GenerationResult r = engine_->generate(req, [&](const GenerationEvent& ev) {
      streamed += ev.text;
      return true;
    });
    EXPECT_EQ(r.finish_reason, "stop");
    EXPECT_EQ(r.stop_index, 1);
    EXPECT_EQ(r.text, full.text.substr(0, at)) << speculative;
    EXPECT_EQ(streamed, r.text);
    EXPECT_LE(r.tokens.size(), 8u);
    EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), full.tokens.begin()));
  }
}

TEST_F(EngineText, LogprobTextsAreTheTokensText) {
  GenerationRequest req = greedy_request(chat_prompt("Hi"), 4);
  req.top_logprobs = 2;
  const GenerationResult r = engine_->generate(req);
  ASSERT_EQ(r.logprobs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.logprobs[i].chosen.text, engine_->decode({r.tokens[i]}, false));
    EXPECT_EQ(r.logprobs[i].top.size(), 2u);
  }
}

}  // namespace
}  // namespace specula
