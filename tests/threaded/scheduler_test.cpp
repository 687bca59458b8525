// Continuous batching (engine/scheduler.h): generations running together — different prompt
// lengths, plain and speculative (drafter, prompt lookup, fixed and auto gamma), greedy and seeded
// sampling, some joining while others are mid-stream, one cancelled — each give exactly the
// tokens they give alone. Prefill chunks share steps with decode rows (a small row budget), one
// prompt at a time, and the slots' prompt caches are reused across generations.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "spec_golden_util.h"
#include "specula/engine/scheduler.h"
#include "specula/io/config.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using spec_test::golden_root;

struct GenerationCase {
  std::vector<int32_t> prompt;
  SpeculativeOptions options;
  bool drafter = false;
  int64_t cancel_after = -1;  // stop at the first step boundary with at least this many tokens
  int64_t join_after = 0;     // start once the first generation has emitted this many tokens
};

std::vector<int32_t> repeated(const std::vector<int32_t>& base, size_t length) {
  std::vector<int32_t> p = base;
  while (p.size() < length) p.push_back(base[1 + p.size() % (base.size() - 1)]);
  p.resize(length);
  return p;
}

std::vector<GenerationCase> mixed_cases(const std::vector<int32_t>& base) {
  auto opts = [](int64_t gamma, bool automatic, double temperature, uint64_t seed) {
    SpeculativeOptions o;
    o.max_tokens = 20;
    o.ignore_eos = true;
    o.gamma.fixed = gamma;
    o.gamma.automatic = automatic;
    o.sampling.temperature = temperature;
    o.sampling.seed = seed;
    return o;
  };
  std::vector<GenerationCase> c;
  c.push_back({repeated(base, 3), opts(0, false, 0.0, 0), false, -1, 0});   // plain greedy
  c.push_back({repeated(base, 29), opts(3, false, 0.0, 0), true, -1, 0});   // drafter, gamma 3
  c.push_back({repeated(base, 11), opts(2, true, 0.0, 0), true, -1, 2});    // drafter, auto
  c.push_back({repeated(base, 40), opts(2, false, 0.8, 5), true, -1, 4});   // sampled, gamma 2
  c.push_back({repeated(base, 17), opts(2, true, 0.9, 9), true, -1, 6});    // sampled, auto
  c.push_back({repeated(base, 33), opts(4, false, 0.0, 0), false, -1, 6});  // prompt lookup
  c.push_back({repeated(base, 21), opts(2, false, 0.0, 0), true, 5, 8});    // cancelled
  c.back().options.max_tokens = 400;
  c[0].options.max_tokens = 40;  // the first one runs while the others join
  for (GenerationCase& k : c)
    if (!k.drafter) k.options.method = DraftMethod::Lookup;  // plain (gamma 0) or prompt lookup
  return c;
}

std::vector<int32_t> alone(const TargetModel& model, const Drafter* drafter, const GenerationCase& c) {
  ThreadPool pool(1);
  TargetCache cache = model.new_cache();
  SpeculativeOptions o = c.options;
  int64_t n = 0;
  if (c.cancel_after >= 0) o.on_step = [&] { return n < c.cancel_after; };
  return generate_speculative(model, cache, c.drafter ? drafter : nullptr, c.prompt, o, pool,
                              [&](int32_t) {
                                ++n;
                                return true;
                              })
      .tokens;
}

// A greedy generation with the drafter at gamma 2 that runs to max_tokens.
GenerationCase drafted_case(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationCase c;
  c.prompt = std::move(prompt);
  c.options.max_tokens = max_tokens;
  c.options.ignore_eos = true;
  c.options.gamma.fixed = 2;
  c.drafter = true;
  return c;
}

class SchedulerConcurrency : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerConcurrency, EveryGenerationGetsItsAloneTokens) {
  const auto dir = golden_root() / GetParam();
  TargetOptions to;
  to.prefill_chunk = 8;
  auto model = TargetModel::load((dir / "model").string(), to);
  auto drafter = Drafter::load((dir / "drafter").string(), *model);
  const auto base = read_json_file((dir / "expected.json").string()).at("prompt").get<std::vector<int32_t>>();
  const std::vector<GenerationCase> cases = mixed_cases(base);
  std::vector<std::vector<int32_t>> want;
  for (const GenerationCase& c : cases) want.push_back(alone(*model, drafter.get(), c));

  ThreadPool pool(2);
  SchedulerOptions so;
  so.slots = 4;       // fewer than the generations: some wait for a slot
  so.step_rows = 12;  // prefill chunks squeezed beside the decode rows
  Scheduler scheduler(*model, pool, so);

  std::mutex m;
  std::condition_variable cv;
  int64_t first_emitted = 0;
  std::vector<std::vector<int32_t>> got(cases.size());
  std::vector<std::string> errors(cases.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cases.size(); ++i) {
    threads.emplace_back([&, i] {
      const GenerationCase& c = cases[i];
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return first_emitted >= c.join_after; });
      }
      ScheduledGeneration g;
      g.prompt = c.prompt;
      g.options = c.options;
      g.drafter = c.drafter ? drafter.get() : nullptr;
      int64_t n = 0;
      g.options.on_emit = [&, i](int32_t, std::span<const float>) {
        ++n;
        if (i == 0) {
          std::lock_guard lock(m);
          ++first_emitted;
          cv.notify_all();
        }
        return true;
      };
      if (c.cancel_after >= 0) g.options.on_step = [&] { return n < c.cancel_after; };
      try {
        got[i] = scheduler.run(std::move(g)).tokens;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
      if (i == 0) {  // release the others even if the first one ended early
        std::lock_guard lock(m);
        first_emitted = 1 << 20;
        cv.notify_all();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(errors[i], "") << "generation " << i;
    EXPECT_EQ(got[i], want[i]) << "generation " << i;
  }
  EXPECT_EQ(scheduler.running(), 0);
  EXPECT_EQ(scheduler.waiting(), 0);
}

TEST_P(SchedulerConcurrency, ASlotsPromptCacheIsReusedAndChangesNoToken) {
  const auto dir = golden_root() / GetParam();
  auto model = TargetModel::load((dir / "model").string());
  auto drafter = Drafter::load((dir / "drafter").string(), *model);
  const auto base = read_json_file((dir / "expected.json").string()).at("prompt").get<std::vector<int32_t>>();
  ThreadPool pool(1);
  SchedulerOptions so;
  so.slots = 2;
  Scheduler scheduler(*model, pool, so);
  const GenerationCase c = drafted_case(repeated(base, 24), 8);
  const std::vector<int32_t> first = alone(*model, drafter.get(), c);
  ScheduledGeneration g{c.prompt, c.options, drafter.get()};
  int64_t cached = -1;
  EXPECT_EQ(scheduler.run(g, &cached).tokens, first);
  EXPECT_EQ(cached, 0);
  // A follow-up turn: the first prompt, its answer and more.
  GenerationCase turn2 = c;
  turn2.prompt.insert(turn2.prompt.end(), first.begin(), first.end());
  turn2.prompt.insert(turn2.prompt.end(), base.begin() + 1, base.end());
  const std::vector<int32_t> want = alone(*model, drafter.get(), turn2);
  g.prompt = turn2.prompt;
  EXPECT_EQ(scheduler.run(g, &cached).tokens, want);
  EXPECT_GE(cached, static_cast<int64_t>(c.prompt.size())) << "the slot that served turn 1 is picked again";
  EXPECT_GT(scheduler.cached_tokens(), 0);
  scheduler.clear_prompt_cache();
  EXPECT_EQ(scheduler.cached_tokens(), 0);
}

// The next turn of a chat diverges a few tokens before the end of the previous prompt (Gemma 4's
// template renders the assistant turn's opener without the generation prompt's empty thought
// block). After an answer longer than the rings' spare positions, the slot goes back to the
// snapshot taken at the end of the first prompt: the shared prefix is reused and the tokens are
// those of a cold run.
TEST_P(SchedulerConcurrency, AChatTurnAfterALongAnswerReusesTheWholePreviousPrompt) {
  const auto dir = golden_root() / GetParam();
  TargetOptions to;
  to.prefill_chunk = 4;
  auto model = TargetModel::load((dir / "model").string(), to);
  auto drafter = Drafter::load((dir / "drafter").string(), *model);
  const auto base = read_json_file((dir / "expected.json").string()).at("prompt").get<std::vector<int32_t>>();
  ThreadPool pool(1);
  SchedulerOptions so;
  so.slots = 1;
  Scheduler scheduler(*model, pool, so);
  // More tokens than the rings' spare positions (rollback reserve, chunk - 1).
  const GenerationCase c = drafted_case(repeated(base, 20), 48);
  ScheduledGeneration g{c.prompt, c.options, drafter.get()};
  int64_t cached = -1;
  const std::vector<int32_t> first = scheduler.run(g, &cached).tokens;
  EXPECT_EQ(first, alone(*model, drafter.get(), c));
  GenerationCase turn2 = c;
  const size_t shared = c.prompt.size() - 3;
  const int32_t last = c.prompt[shared];
  turn2.prompt.resize(shared);
  turn2.prompt.push_back(last == 0 ? 1 : last - 1);  // diverges 3 tokens before the first prompt's end
  turn2.prompt.insert(turn2.prompt.end(), first.begin(), first.end());
  turn2.prompt.insert(turn2.prompt.end(), base.begin() + 1, base.end());
  turn2.options.max_tokens = 6;
  g.prompt = turn2.prompt;
  g.options = turn2.options;
  EXPECT_EQ(scheduler.run(g, &cached).tokens, alone(*model, drafter.get(), turn2));
  EXPECT_EQ(cached, static_cast<int64_t>(shared));
  // A third turn after a short answer reuses its prompt by plain rollback.
  GenerationCase turn3 = turn2;
  turn3.prompt.push_back(base[2]);
  g.prompt = turn3.prompt;
  EXPECT_EQ(scheduler.run(g, &cached).tokens, alone(*model, drafter.get(), turn3));
  EXPECT_EQ(cached, static_cast<int64_t>(turn2.prompt.size()));
}

TEST(SchedulerErrors, ABadGenerationFailsAloneAndTheOthersFinish) {
  const auto dir = golden_root() / "dense-bf16-hf";
  auto model = TargetModel::load((dir / "model").string());
  ThreadPool pool(1);
  Scheduler scheduler(*model, pool, SchedulerOptions{2, 0, true});
  ScheduledGeneration bad;
  bad.prompt = {2, 5};
  bad.options.method = DraftMethod::Lookup;
  bad.options.gamma.fixed = 999;  // past the rollback reserve
  try {
    scheduler.run(bad);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollback reserve"), std::string::npos) << e.what();
  }
  ScheduledGeneration ok;
  ok.prompt = {2, 5, 7};
  ok.options.max_tokens = 4;
  ok.options.ignore_eos = true;
  ok.options.method = DraftMethod::Lookup;
  ok.options.gamma.fixed = 0;
  EXPECT_EQ(scheduler.run(ok).tokens.size(), 4u);
  EXPECT_THROW(Scheduler(*model, pool, SchedulerOptions{0, 0, true}), Error);
}

TEST(SchedulerKvBudget, AGenerationWaitsForMemoryAndOneThatCanNeverFitFails) {
  const auto dir = golden_root() / "e4b-like-q4g64-mlx";
  auto model = TargetModel::load((dir / "model").string());
  TargetCache probe = model->new_cache();
  ScheduledGeneration g;
  g.prompt = {2, 5, 7, 9};
  g.options.max_tokens = 100;
  g.options.ignore_eos = true;
  g.options.method = DraftMethod::Lookup;
  g.options.gamma.fixed = 0;
  const uint64_t one = probe.bytes_at(static_cast<int64_t>(g.prompt.size()) + 100 + 16 + 1);
  ThreadPool pool(1);
  SchedulerOptions so;
  so.slots = 2;
  so.kv_budget_bytes = one + one / 2;  // room for one such generation, not two
  Scheduler scheduler(*model, pool, so);
  std::vector<int32_t> want;
  {
    TargetCache c = model->new_cache();
    want = generate_speculative(*model, c, nullptr, g.prompt, g.options, pool).tokens;
  }
  std::atomic<int64_t> most{0};
  auto run_one = [&] {
    ScheduledGeneration mine = g;
    mine.options.on_step = [&] {  // on the scheduler's thread, between steps
      most = std::max(most.load(), scheduler.running());
      return true;
    };
    return scheduler.run(std::move(mine)).tokens;
  };
  std::vector<int32_t> a, b;
  std::thread ta([&] { a = run_one(); });
  std::thread tb([&] { b = run_one(); });
  ta.join();
  tb.join();
  EXPECT_EQ(a, want);
  EXPECT_EQ(b, want);
  EXPECT_EQ(most.load(), 1) << "the second generation waited for the first one's memory";

  ScheduledGeneration huge = g;
  huge.options.max_tokens = 100000;
  try {
    scheduler.run(huge);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the KV budget"), std::string::npos) << e.what();
  }
}

// Two prompts admitted together while another generation decodes: the earlier one is prefilled
// alone, in chunks of the default step budget less the decode row, and the later one only after
// it (prefill rows are bound by the multiply rate, so sharing steps would delay both).
TEST(SchedulerSteps, PromptsArePrefilledOneAfterAnotherInSmallChunksWhileOthersDecode) {
  const auto dir = golden_root() / "dense-bf16-hf";
  auto model = TargetModel::load((dir / "model").string());
  ThreadPool pool(1);
  Scheduler scheduler(*model, pool, SchedulerOptions{3, 0, false});
  auto plain = [](std::vector<int32_t> prompt, int64_t max_tokens) {
    ScheduledGeneration g;
    g.prompt = std::move(prompt);
    g.options.max_tokens = max_tokens;
    g.options.ignore_eos = true;
    g.options.method = DraftMethod::Lookup;
    g.options.gamma.fixed = 0;
    return g;
  };
  constexpr int64_t kPrompt = 100;
  std::vector<int32_t> long_prompt{2};
  for (int64_t i = 1; i < kPrompt; ++i) long_prompt.push_back(static_cast<int32_t>(3 + i % 50));

  std::mutex m;
  std::vector<char> emits;  // who emitted, in order, once both long prompts were waiting
  bool gate_passed = false;
  auto record = [&](char who) {
    std::lock_guard lock(m);
    if (gate_passed) emits.push_back(who);
  };
  ScheduledGeneration decoding = plain({2, 5, 7}, 40);
  decoding.options.on_emit = [&](int32_t, std::span<const float>) {
    if (!gate_passed) {  // hold the loop until both long prompts wait, so one admission takes both
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (scheduler.waiting() < 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard lock(m);
      gate_passed = true;
      return true;
    }
    record('d');
    return true;
  };
  std::thread td([&] { scheduler.run(decoding); });
  while (scheduler.running() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto long_one = [&](char who) {
    ScheduledGeneration g = plain(long_prompt, 8);
    g.options.on_emit = [&, who](int32_t, std::span<const float>) {
      record(who);
      return true;
    };
    return scheduler.run(std::move(g)).tokens.size();
  };
  size_t na = 0, nb = 0;
  std::thread ta([&] { na = long_one('a'); });
  std::thread tb([&] { nb = long_one('b'); });
  ta.join();
  tb.join();
  td.join();
  EXPECT_EQ(na, 8u);
  EXPECT_EQ(nb, 8u);
  ASSERT_TRUE(gate_passed);

  const std::string order(emits.begin(), emits.end());
  const size_t first_long = order.find_first_of("ab");
  ASSERT_NE(first_long, std::string::npos) << order;
  const char earlier = order[first_long], later = earlier == 'a' ? 'b' : 'a';
  const int64_t budget = kDefaultStepRows - 1;  // beside one decode row
  const auto count = [&](char who, size_t end) {
    return std::count(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(end), who);
  };
  EXPECT_EQ(count('d', first_long), (kPrompt + budget - 1) / budget) << order;
  const size_t first_later = order.find(later);
  ASSERT_NE(first_later, std::string::npos) << order;
  // The later prompt starts after the earlier one's first token, in chunks beside two decode rows.
  const int64_t later_budget = kDefaultStepRows - 2;
  EXPECT_EQ(count(earlier, first_later), 1 + (kPrompt + later_budget - 1) / later_budget) << order;
}

INSTANTIATE_TEST_SUITE_P(Goldens, SchedulerConcurrency,
                         ::testing::Values("e4b-like-q4g64-mlx", "moe-q4g64-mlx", "kveq-densehead-random"),
                         [](const auto& info) { return spec_test::param_name(info.param); });

}  // namespace
}  // namespace specula
