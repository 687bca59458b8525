#include "specula/engine/scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "specula/engine/gamma_allocation.h"
#include "specula/speculative/speculative_session.h"
#include "specula/util/elapsed.h"
#include "specula/util/error.h"

namespace specula {

namespace {

using Clock = std::chrono::steady_clock;

// Prompt rows one step gives to prefills even when the decoding sequences' rows fill its budget,
// so that an admitted generation always makes progress.
constexpr int64_t kMinPrefillRows = 16;

// A greedy `auto` sequence that the allocation left plain for a run of rounds is weighed once as
// if its drafts were accepted kProbeAcceptance of the time (and at most one of them), so that an
// acceptance that has risen since it last drafted can be noticed: it drafts only where such a
// draft would pay. One sequence per step at most; the run doubles after each probe (up to
// kMaxProbeAfter), and starts over once the sequence drafts on its own estimate.
constexpr int64_t kProbeAfterPlainRounds = 16;
constexpr int64_t kMaxProbeAfter = 256;
constexpr double kProbeAcceptance = 0.9;

// Weight of the newest batched drafter call in its cost estimate.
constexpr double kDraftCostWeight = 0.3;

// How far before the end of a prompt its snapshot can go back: chat templates open the assistant
// turn differently in the generation prompt and in the history (Gemma 4's generation prompt ends
// with an empty thought block that the re-rendered history leaves out: 4 tokens).
constexpr int64_t kSnapshotMargin = 32;

// How a new generation reuses a slot's cache: `keep` prompt tokens stay (at most all but the
// last prompt token), by rolling the cache back or, when the rings have moved on too far for that,
// by restoring the snapshot taken at the end of the previous prompt (which reaches back
// kSnapshotMargin positions).
struct Reuse {
  int64_t keep = 0;
  bool from_snapshot = false;
};

Reuse plan_reuse(const std::vector<int32_t>& held, const TargetCache& cache, const CacheSnapshot& prompt_end,
                 const std::vector<int32_t>& prompt) {
  if (static_cast<int64_t>(held.size()) != cache.offset()) return {};
  size_t common = 0;
  while (common < held.size() && common < prompt.size() && held[common] == prompt[common]) ++common;
  const int64_t keep = std::min<int64_t>(static_cast<int64_t>(common), static_cast<int64_t>(prompt.size()) - 1);
  if (keep <= 0) return {};
  if (cache.offset() - keep <= cache.max_rollback()) return {keep, false};
  if (prompt_end.offset > 0 && prompt_end.earliest <= keep) return {std::min(keep, prompt_end.offset), true};
  return {};
}

}  // namespace

struct Scheduler::Slot {
  explicit Slot(TargetCache c) : cache(std::move(c)) {}
  TargetCache cache;
  std::vector<int32_t> tokens;  // what the cache holds, for the prompt cache (when idle)
  CacheSnapshot prompt_end;     // the caches at the end of the last prompt (see plan_reuse)
  Job* job = nullptr;
  uint64_t last_used = 0;
  std::atomic<int64_t> held{0};    // positions of a running generation (for kv_utilization)
  std::atomic<int64_t> cached{0};  // tokens.size(), readable from any thread
};

struct Scheduler::Job {
  ScheduledGeneration generation;
  std::unique_ptr<SpeculativeSession> session;
  Slot* slot = nullptr;
  int64_t keep = 0;
  std::exception_ptr error;
  ScheduledOutcome outcome;
  uint64_t kv_reserved = 0;                      // bytes counted against the KV budget while it runs
  int64_t plain_rounds = 0;                      // scheduled gamma-0 rounds in a row
  int64_t probe_after = kProbeAfterPlainRounds;  // ... before the next probe
  bool done = false;
};

Scheduler::Scheduler(const TargetModel& model, ThreadPool& pool, const SchedulerOptions& options)
    : model_(model), pool_(pool), options_(options) {
  if (options.slots < 1) specula::fail("scheduler: {} slots; at least 1 is needed", options.slots);
  if (options.step_rows < 0) specula::fail("scheduler: step row budget {} must be >= 0", options.step_rows);
  step_rows_ = options.step_rows > 0 ? options.step_rows : kDefaultStepRows;
  // A verify step of the largest gamma must fit one forward of a cache.
  CacheOptions co;
  co.rollback_reserve = model.options().rollback_reserve;
  co.max_chunk = std::max(model.options().prefill_chunk, co.rollback_reserve + 1);
  co.kv_type = model.options().kv_type;
  for (int i = 0; i < options.slots; ++i) slots_.push_back(std::make_unique<Slot>(TargetCache(model.config(), co)));
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

SpeculativeResult Scheduler::run(ScheduledGeneration generation, int64_t* cached_tokens) {
  // A callback runs on the scheduler's thread: waiting there for another generation would wait forever.
  if (std::this_thread::get_id() == thread_.get_id())
    specula::fail("scheduler: a generation was started from a generation callback (it would wait for itself)");
  Job job;
  job.generation = std::move(generation);
  {
    std::unique_lock lock(mutex_);
    if (stopping_) specula::fail("scheduler: the engine is shutting down");
    waiting_.push_back(&job);
    wake_.notify_all();
    done_.wait(lock, [&] { return job.done; });
  }
  if (job.outcome.error) std::rethrow_exception(job.outcome.error);
  if (cached_tokens) *cached_tokens = job.outcome.cached_tokens;
  return std::move(job.outcome.result);
}

int64_t Scheduler::running() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(active_.size());
}

int64_t Scheduler::waiting() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(waiting_.size());
}

double Scheduler::kv_utilization() const {
  double held = 0;
  for (const auto& s : slots_) held += static_cast<double>(s->held.load());
  return held / (static_cast<double>(slots_.size()) * static_cast<double>(model_.max_context()));
}

int64_t Scheduler::cached_tokens() const {
  int64_t most = 0;
  for (const auto& s : slots_) most = std::max(most, s->cached.load());
  return most;
}

void Scheduler::clear_prompt_cache() {
  std::lock_guard lock(mutex_);
  for (auto& s : slots_)
    if (s->job == nullptr) forget(*s);
}

// Drops what a slot's cache holds for the prompt cache.
void Scheduler::forget(Slot& slot) {
  slot.tokens.clear();
  slot.cached = 0;
  slot.prompt_end = {};
  slot.cache.reset();
}

void Scheduler::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || !active_.empty(); });
    if (stopping_) {
      const auto stopped = std::make_exception_ptr(Error("scheduler: the engine is shutting down"));
      for (Job* j : active_) fail(*j, stopped);
      for (Job* j : waiting_) fail(*j, stopped);
      active_.clear();
      waiting_.clear();
      done_.notify_all();
      return;
    }
    admit(lock);
    if (active_.empty()) continue;
    std::vector<Job*> active = active_;
    lock.unlock();
    step(active);
    lock.lock();
    const auto ended = [](const Job* j) { return j->error || j->session->finished(); };
    for (Job* j : active_)
      if (ended(j)) finish(*j);
    std::erase_if(active_, [](const Job* j) { return j->done; });
    done_.notify_all();
  }
}

// The most KV bytes the generation's cache can hold: every prompt and generated position plus the
// drafts of a last round, within the context.
uint64_t Scheduler::kv_need(const Job& job, const Slot& slot) const {
  const auto prompt = static_cast<int64_t>(job.generation.prompt.size());
  const int64_t positions = prompt + job.generation.options.max_tokens + slot.cache.options().rollback_reserve + 1;
  const uint64_t snapshot =
      takes_prompt_end_snapshot(job, slot) ? slot.cache.snapshot_bytes(prompt, kSnapshotMargin) : 0;
  return slot.cache.bytes_at(std::min(positions, model_.max_context())) + snapshot;
}

// Whether the generation can move the rings so far past its prompt that the next prompt of a chat
// (which diverges near the end of this one) could no longer roll back there.
bool Scheduler::takes_prompt_end_snapshot(const Job& job, const Slot& slot) const {
  return options_.prompt_cache && slot.cache.has_rings() &&
         job.generation.options.max_tokens + slot.cache.options().rollback_reserve + 1 >
             slot.cache.ring_extra() - kSnapshotMargin;
}

uint64_t Scheduler::idle_bytes(const Slot& slot) { return slot.cache.allocated_bytes() + slot.prompt_end.bytes(); }

bool Scheduler::make_room(uint64_t need, const Slot& slot) {
  auto used = [&] {
    uint64_t b = 0;
    for (const Job* j : active_) b += j->kv_reserved;
    for (const auto& s : slots_)
      if (s->job == nullptr && s.get() != &slot) b += idle_bytes(*s);
    return b;
  };
  while (used() + need > options_.kv_budget_bytes) {
    Slot* victim = nullptr;
    for (auto& s : slots_)
      if (s->job == nullptr && s.get() != &slot && idle_bytes(*s) > 0 &&
          (victim == nullptr || s->last_used < victim->last_used))
        victim = s.get();
    if (victim == nullptr) return false;
    forget(*victim);
    victim->cache.release_unused();
  }
  return true;
}

// Moves waiting generations into free slots, oldest first (under the lock).
void Scheduler::admit(std::unique_lock<std::mutex>&) {
  bool admitted = false;
  while (!waiting_.empty()) {
    Slot* slot = pick_slot(waiting_.front()->generation.prompt);
    if (slot == nullptr) break;
    Job* job = waiting_.front();
    if (options_.kv_budget_bytes > 0) {
      const uint64_t need = kv_need(*job, *slot);
      if (need > options_.kv_budget_bytes) {
        waiting_.pop_front();
        fail(*job,
             std::make_exception_ptr(Error(fmt::format(
                 "scheduler: the generation's KV cache can grow to {:.1f} MiB ({} prompt + {} max tokens), "
                 "more than the KV budget of {:.1f} MiB",
                 static_cast<double>(need) / (1 << 20), job->generation.prompt.size(),
                 job->generation.options.max_tokens, static_cast<double>(options_.kv_budget_bytes) / (1 << 20)))));
        admitted = true;
        continue;
      }
      if (!make_room(need, *slot)) break;  // waits for a running generation to end
      job->kv_reserved = need;
    }
    waiting_.pop_front();
    start(*job, *slot);
    if (job->error) {
      fail(*job, job->error);
    } else {
      active_.push_back(job);
    }
    admitted = true;
  }
  if (admitted) done_.notify_all();
}

// The free slot that keeps the longest prefix of `prompt`, else the least recently used one.
Scheduler::Slot* Scheduler::pick_slot(const std::vector<int32_t>& prompt) {
  Slot* best = nullptr;
  int64_t best_keep = -1;
  for (auto& s : slots_) {
    if (s->job != nullptr) continue;
    const int64_t keep = options_.prompt_cache ? plan_reuse(s->tokens, s->cache, s->prompt_end, prompt).keep : 0;
    if (keep > best_keep || (keep == best_keep && s->last_used < best->last_used)) {
      best = s.get();
      best_keep = keep;
    }
  }
  return best;
}

void Scheduler::start(Job& job, Slot& slot) {
  job.slot = &slot;
  slot.job = &job;
  const std::vector<int32_t>& prompt = job.generation.prompt;
  try {
    const Reuse reuse = options_.prompt_cache ? plan_reuse(slot.tokens, slot.cache, slot.prompt_end, prompt) : Reuse{};
    job.keep = reuse.keep;
    if (reuse.from_snapshot) {
      slot.cache.restore(slot.prompt_end, job.keep);
    } else if (job.keep > 0 && slot.cache.offset() > job.keep) {
      slot.cache.rollback(slot.cache.offset() - job.keep);
    }
    if (job.keep == 0) slot.cache.reset();
    slot.tokens.clear();  // unknown until the generation has finished
    slot.cached = 0;
    slot.prompt_end = {};  // this prompt's own end is where the next one may diverge
    job.generation.options.continue_cache = job.keep > 0;
    job.session = std::make_unique<SpeculativeSession>(model_, slot.cache, job.generation.drafter, prompt,
                                                       job.generation.options);
    slot.held = slot.cache.offset();
  } catch (...) {
    job.error = std::current_exception();
  }
}

// One batched forward: the verify rows of every decoding sequence, then a prefill chunk of one
// prefilling sequence under the row budget. A sequence whose own work throws ends alone; a forward
// that throws ends every sequence in it.
void Scheduler::step(std::vector<Job*>& active) {
  StepPlan plan = plan_step(active);
  if (plan.batch.empty()) return;
  const auto t0 = Clock::now();
  std::vector<ForwardOutput> outs;
  try {
    outs = model_.forward_batch(plan.batch, pool_, &scratch_);
  } catch (...) {
    for (Job* j : plan.jobs) j->error = std::current_exception();
    return;
  }
  const double ms = ms_since(t0);
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    Job* j = plan.jobs[i];
    try {
      j->session->complete_step(outs[i], ms);
      const TargetCache& cache = j->slot->cache;
      if (plan.prefill[i] && !j->session->prefilling() && takes_prompt_end_snapshot(*j, *j->slot) &&
          cache.offset() == static_cast<int64_t>(j->generation.prompt.size()))
        j->slot->prompt_end = cache.snapshot(kSnapshotMargin);
    } catch (...) {
      j->error = std::current_exception();
    }
    j->slot->held = j->slot->cache.offset();
  }
  // What a step of this many rows costs the batch: the forward and what each sequence does with
  // its rows (accepting, rolling back, emitting), which grows with the rows too.
  const double step_ms = ms_since(t0);
  step_cost_.record(plan.rows(), step_ms);
}

int64_t Scheduler::StepPlan::rows() const {
  int64_t n = 0;
  for (const SequenceRows& r : batch) n += static_cast<int64_t>(r.tokens.size());
  return n;
}

Scheduler::StepPlan Scheduler::plan_step(std::vector<Job*>& active) {
  StepPlan plan;
  auto add = [&](Job* j, bool prefilling, auto&& rows_of) {
    try {
      plan.batch.push_back(rows_of());
      plan.jobs.push_back(j);
      plan.prefill.push_back(prefilling);
      return static_cast<int64_t>(plan.batch.back().tokens.size());
    } catch (...) {
      j->error = std::current_exception();
      return int64_t{0};
    }
  };
  std::vector<Job*> decoding;
  bool prompt_waits = false;
  for (Job* j : active) {
    if (j->session->finished()) continue;
    if (j->session->prefilling()) {
      prompt_waits = true;
    } else {
      decoding.push_back(j);
    }
  }
  begin_rounds(decoding, prompt_waits);
  std::erase_if(decoding, [](const Job* j) { return static_cast<bool>(j->error); });
  draft_together(decoding);
  int64_t decode_rows = 0;
  for (Job* j : decoding)
    if (!j->error) decode_rows += add(j, false, [&] { return j->session->verify_rows(); });
  // Prefill rows are bound by the multiply rate: two prompts sharing a step would both wait for
  // both, while one after the other the first gets its first token in half the time and the
  // second no later. So one sequence prefills per step, the earliest admitted first.
  const int64_t step_rows = decode_rows > 0 ? step_rows_ : std::max(step_rows_, model_.options().prefill_chunk);
  const int64_t budget = std::max(step_rows - decode_rows, kMinPrefillRows);
  for (Job* j : active) {
    if (j->session->finished() || !j->session->prefilling()) continue;
    if (add(j, true, [&] { return j->session->next_step(budget, pool_); }) > 0) break;
  }
  return plan;
}

// The drafts of every decoding sequence: draft step k of all sequences that use one drafter runs
// as one batched drafter call (the drafter's weights stream once for all of them), and each
// sequence is charged an equal share of its time.
void Scheduler::draft_together(std::vector<Job*>& decoding) {
  std::vector<Job*> jobs;
  std::vector<DraftRow> rows;
  for (;;) {
    jobs.clear();
    rows.clear();
    const Drafter* drafter = nullptr;
    for (Job* j : decoding) {
      if (j->error) continue;
      const std::optional<DraftRow> row = j->session->draft_row();
      if (!row || (drafter != nullptr && j->generation.drafter != drafter)) continue;
      drafter = j->generation.drafter;
      jobs.push_back(j);
      rows.push_back(*row);
    }
    if (rows.empty()) return;
    const auto t0 = Clock::now();
    std::vector<DraftStep> steps;
    try {
      steps = drafter->step_batch(rows, pool_);
    } catch (...) {
      for (Job* j : jobs) j->error = std::current_exception();
      continue;
    }
    const double call_ms = ms_since(t0);
    draft_step_ms_ = draft_step_ms_ < 0 ? call_ms : draft_step_ms_ + kDraftCostWeight * (call_ms - draft_step_ms_);
    const double share = call_ms / static_cast<double>(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      try {
        jobs[i]->session->add_draft(std::move(steps[i]), share);
      } catch (...) {
        jobs[i]->error = std::current_exception();
      }
    }
  }
}

// Starts the round of every decoding sequence. Alone, a sequence sizes its rounds itself. Beside
// others, the greedy `auto` ones get their gammas from one allocation over the step
// (engine/gamma_allocation.h), around the rows the other sequences' rounds add; beside a prompt
// chunk they decode plainly (the step is compute-bound, and a draft row would delay the prompt).
void Scheduler::begin_rounds(std::vector<Job*>& decoding, bool prompt_waits) {
  const bool shared = decoding.size() + (prompt_waits ? 1 : 0) > 1;
  StepLoad load;
  load.draft_step_ms = draft_step_ms_;
  std::vector<Job*> scheduled;
  std::vector<GammaCandidate> candidates;
  const Job* prober = nullptr;  // the sequence plain for longest past its probe interval
  for (Job* j : decoding)
    if (shared && j->session->gamma_follows_load() && j->plain_rounds >= j->probe_after &&
        (prober == nullptr || j->plain_rounds > prober->plain_rounds))
      prober = j;
  for (Job* j : decoding) {
    SpeculativeSession& s = *j->session;
    if (shared && s.gamma_follows_load()) {
      const bool probe = j == prober;
      scheduled.push_back(j);
      candidates.push_back({probe ? std::max(s.acceptance(), kProbeAcceptance) : s.acceptance(),
                            probe ? std::min<int64_t>(s.gamma_room(), 1) : s.gamma_room(), s.uses_drafter()});
      continue;
    }
    try {
      s.set_scheduled_gamma(-1);
      s.begin_round();
      load.other_rows += s.round_gamma() + 1;
      load.other_tokens += expected_round_tokens(s.acceptance(), s.round_gamma());
      if (s.uses_drafter()) load.other_draft_steps = std::max(load.other_draft_steps, s.round_gamma());
    } catch (...) {
      j->error = std::current_exception();
    }
  }
  if (scheduled.empty()) return;
  std::vector<int64_t> gammas(scheduled.size(), 0);
  if (!prompt_waits) gammas = allocate_gammas(candidates, load, step_cost_);
  for (size_t i = 0; i < scheduled.size(); ++i) {
    Job* j = scheduled[i];
    if (gammas[i] > 0) {
      j->probe_after = j == prober ? std::min(2 * j->probe_after, kMaxProbeAfter) : kProbeAfterPlainRounds;
      j->plain_rounds = 0;
    } else {
      ++j->plain_rounds;
    }
    try {
      j->session->set_scheduled_gamma(gammas[i]);
      j->session->begin_round();
    } catch (...) {
      j->error = std::current_exception();
    }
  }
}

// A generation has ended (under the lock): record what its slot's cache holds, free the slot.
void Scheduler::finish(Job& job) {
  if (job.error) return fail(job, job.error);
  Slot& slot = *job.slot;
  SpeculativeResult r = job.session->take_result();
  const std::vector<int32_t>& prompt = job.generation.prompt;
  const size_t offset = static_cast<size_t>(slot.cache.offset());
  if (options_.prompt_cache && offset <= prompt.size() + r.cache_tail.size()) {
    slot.tokens.assign(prompt.begin(), prompt.end());
    slot.tokens.insert(slot.tokens.end(), r.cache_tail.begin(), r.cache_tail.end());
    slot.tokens.resize(offset);
  } else {
    forget(slot);
  }
  slot.cached = static_cast<int64_t>(slot.tokens.size());
  job.outcome.result = std::move(r);
  job.outcome.cached_tokens = job.keep;
  job.session.reset();
  slot.job = nullptr;
  slot.last_used = ++clock_;
  slot.held = 0;
  job.done = true;
}

// A generation ends with `error` (under the lock); its slot, if any, starts the next one cold.
void Scheduler::fail(Job& job, std::exception_ptr error) {
  if (Slot* slot = job.slot) {
    forget(*slot);
    slot->job = nullptr;
    slot->last_used = ++clock_;
    slot->held = 0;
  }
  job.session.reset();
  job.outcome.error = error;
  job.done = true;
}

}  // namespace specula
