#pragma once
// Continuous batching: many generations share every target forward.
//
// The scheduler owns `slots` KV caches and one thread. A generation waits until a slot is free,
// then joins at the next step boundary; each step packs the verify rows of every decoding
// sequence (gamma + 1 each, gamma 0 for plain decoding) and then a prefill chunk of one newly
// admitted sequence (the earliest) under a per-step row budget, so a long prompt never stalls the
// streams already decoding; one batched forward runs them all (model/target_model.h forward_batch), and each
// sequence accepts, rolls back and emits on its own (speculative/speculative_session.h). Rows are batch
// invariant, so every generation's tokens are the bytes it would get alone.
//
// Prompt cache, per slot: a slot remembers the tokens its cache holds. A new generation takes
// the free slot sharing the longest prefix with its prompt (else the least recently used one),
// keeps that prefix (rolling the rest back) and prefills only the remainder; at least the last
// prompt token is always fed. A chat's next prompt diverges where the previous answer began (the
// template re-renders the answer without its thinking), and an answer longer than the rings'
// spare positions leaves the sliding-window caches unable to roll back that far: so a generation
// that can write that much keeps a snapshot of the caches at the end of its prompt
// (model/target_cache.h), and the next one restores it instead of starting over.
//
// KV memory: with a budget (SchedulerOptions::kv_budget_bytes) a generation is admitted only when
// its cache's largest size fits beside the others'; one that could never fit fails at once.
//
// Drafting: every decoding sequence's draft step k runs in one batched drafter call
// (model/drafter.h step_batch), so the drafter's weights stream once per step for all of them.
//
// `--gamma auto` under load: while several sequences share the steps, the greedy `auto` ones get
// their gammas from one allocation that maximizes the step's expected tokens per ms, priced by
// the measured cost of a step by its row count (engine/gamma_allocation.h, engine/step_cost.h):
// every sequence drafts while extra rows are nearly free, and speculation shrinks or stops once
// rows cost their multiply. A lone stream sizes its rounds itself, as without batching. Sampled
// generations choose gamma from acceptance alone, as always (their text must not depend on timings).
//
// Callbacks of a generation (SpeculativeOptions on_emit / on_step, on_token) run on the
// scheduler's thread, between steps.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "specula/engine/step_cost.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"

namespace specula {

class SpeculativeSession;

// The row budget of a step in which sequences decode, by default. Prefill rows are bound by the
// multiply rate, so a big prompt chunk would hold every decoding stream for its whole duration,
// and a request arriving meanwhile would wait for it as well; chunks this small keep both waits
// short for a few percent of prefill speed. A step in which nothing decodes prefills a whole chunk.
inline constexpr int64_t kDefaultStepRows = 32;

struct SchedulerOptions {
  int slots = 1;          // sequences decoding at once (--parallel)
  int64_t step_rows = 0;  // row budget of a step in which sequences decode; 0 = kDefaultStepRows
  bool prompt_cache = true;
  // KV memory the slots may hold (0 = no limit): a running generation counts what its cache can
  // grow to (prompt + max_tokens + the rollback reserve, within the context), an idle slot what it
  // holds for the prompt cache. A generation waits while it does not fit, after the idle slots'
  // prompt caches have been dropped (least recently used first).
  uint64_t kv_budget_bytes = 0;
};

struct ScheduledGeneration {
  std::vector<int32_t> prompt;
  SpeculativeOptions options;  // continue_cache is set by the scheduler
  const Drafter* drafter = nullptr;
};

struct ScheduledOutcome {
  SpeculativeResult result;
  int64_t cached_tokens = 0;  // prompt tokens reused from the slot's cache
  std::exception_ptr error;   // what the generation threw (it ended there)
};

class Scheduler {
 public:
  Scheduler(const TargetModel& model, ThreadPool& pool, const SchedulerOptions& options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Runs one generation to its end (blocking; any number of callers at once). Throws what
  // the generation threw; a failed generation's slot starts its next one cold.
  SpeculativeResult run(ScheduledGeneration generation, int64_t* cached_tokens = nullptr);

  int slots() const { return static_cast<int>(slots_.size()); }
  int64_t running() const;  // generations holding a slot
  int64_t waiting() const;  // generations waiting for one
  // Context positions held by the running generations over slots x max_context (0..1).
  double kv_utilization() const;
  // The longest prompt-cache entry of any slot.
  int64_t cached_tokens() const;
  // Forgets every idle slot's prompt cache.
  void clear_prompt_cache();

 private:
  struct Slot;
  struct Job;
  void loop();
  void admit(std::unique_lock<std::mutex>& lock);
  Slot* pick_slot(const std::vector<int32_t>& prompt);
  uint64_t kv_need(const Job& job, const Slot& slot) const;
  bool takes_prompt_end_snapshot(const Job& job, const Slot& slot) const;
  static uint64_t idle_bytes(const Slot& slot);
  static void forget(Slot& slot);
  // Whether `need` more bytes fit the budget beside `slot`, dropping idle prompt caches to make room.
  bool make_room(uint64_t need, const Slot& slot);
  void start(Job& job, Slot& slot);
  // One step's rows: batch[i] belongs to jobs[i], prefill[i] = it was prefilling when planned.
  struct StepPlan {
    std::vector<SequenceRows> batch;
    std::vector<Job*> jobs;
    std::vector<bool> prefill;
    int64_t rows() const;
  };
  void step(std::vector<Job*>& active);
  StepPlan plan_step(std::vector<Job*>& active);
  void draft_together(std::vector<Job*>& decoding);
  void begin_rounds(std::vector<Job*>& decoding, bool prompt_waits);
  void finish(Job& job);
  void fail(Job& job, std::exception_ptr error);

  const TargetModel& model_;
  ThreadPool& pool_;
  SchedulerOptions options_;
  int64_t step_rows_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  ForwardScratch scratch_;
  StepCostModel step_cost_;      // the loop's only, as is the estimate below
  double draft_step_ms_ = -1.0;  // one batched drafter call; < 0 = none measured yet

  mutable std::mutex mutex_;
  std::condition_variable wake_;  // the loop: new work or stopping
  std::condition_variable done_;  // callers: a job finished
  std::deque<Job*> waiting_;
  std::vector<Job*> active_;  // touched by the loop only (under mutex_ when resized)
  uint64_t clock_ = 0;        // slot use order
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace specula
