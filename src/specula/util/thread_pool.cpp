#include "specula/util/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace specula {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spins until done() or `budget` has passed; returns done(). The budget is in time, not in
// iterations, because a pause instruction costs from ~10 to ~150 cycles depending on the CPU, and
// spinning long on a busy machine steals the core the other thread needs.
template <typename Done>
bool spin_until(Done done, std::chrono::microseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  spans_ = std::vector<Span>(static_cast<size_t>(threads));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    epoch_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(0);
  return pool;
}

namespace {
constexpr uint64_t pack_span(uint64_t front, uint64_t back) { return front << 32 | back; }
constexpr uint64_t span_front(uint64_t bounds) { return bounds >> 32; }
constexpr uint64_t span_back(uint64_t bounds) { return bounds & 0xffffffffu; }

// A balanced job's smallest claim is this fraction of a worker's first range: fine enough that the
// last chunks even out the threads, coarse enough that a claim (one compare-exchange) costs next
// to nothing against the work it hands out.
constexpr int64_t kBalancedMinChunkDivisor = 32;

// Worker `worker`'s part of `grains` whole grains split `parts` ways: contiguous, sizes differing
// by at most one.
void static_part(int64_t grains, int parts, int worker, int64_t& g0, int64_t& g1) {
  const int64_t per = grains / parts;
  const int64_t extra = grains % parts;
  g0 = worker * per + std::min<int64_t>(worker, extra);
  g1 = g0 + per + (worker < extra ? 1 : 0);
}
}  // namespace

void ThreadPool::call(int worker, int64_t begin, int64_t end) {
  if (begin >= end) return;
  try {
    (*job_)(worker, begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::run_range(int worker) {
  if (worker >= job_parts_) return;
  if (job_balanced_) return run_balanced(worker);
  int64_t g0 = 0, g1 = 0;
  static_part((job_n_ + job_grain_ - 1) / job_grain_, job_parts_, worker, g0, g1);
  call(worker, std::min(job_n_, g0 * job_grain_), std::min(job_n_, g1 * job_grain_));
}

void ThreadPool::run_balanced(int worker) {
  const auto run_grains = [&](uint64_t g0, uint64_t g1) {
    call(worker, std::min<int64_t>(job_n_, static_cast<int64_t>(g0) * job_grain_),
         std::min<int64_t>(job_n_, static_cast<int64_t>(g1) * job_grain_));
  };
  const auto chunk = [&](uint64_t left) {
    return std::min(left, std::max(static_cast<uint64_t>(job_min_chunk_), left / 4));
  };
  // Its own range, front to back.
  std::atomic<uint64_t>& own = spans_[static_cast<size_t>(worker)].bounds;
  uint64_t s = own.load(std::memory_order_acquire);
  while (span_front(s) < span_back(s)) {
    const uint64_t f = span_front(s), c = chunk(span_back(s) - f);
    if (own.compare_exchange_weak(s, pack_span(f + c, span_back(s)), std::memory_order_acq_rel,
                                  std::memory_order_acquire)) {
      run_grains(f, f + c);
      s = own.load(std::memory_order_acquire);
    }
  }
  // Then the back of whichever range has the most left, until none has any.
  for (;;) {
    int victim = -1;
    uint64_t most = 0;
    for (int v = 0; v < job_parts_; ++v) {
      const uint64_t b = spans_[static_cast<size_t>(v)].bounds.load(std::memory_order_relaxed);
      if (span_back(b) > span_front(b) && span_back(b) - span_front(b) > most) {
        most = span_back(b) - span_front(b);
        victim = v;
      }
    }
    if (victim < 0) return;
    std::atomic<uint64_t>& other = spans_[static_cast<size_t>(victim)].bounds;
    s = other.load(std::memory_order_acquire);
    while (span_front(s) < span_back(s)) {
      const uint64_t b = span_back(s), c = chunk(b - span_front(s));
      if (other.compare_exchange_weak(s, pack_span(span_front(s), b - c), std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        run_grains(b - c, b);
        break;
      }
    }
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly (decode issues hundreds of small jobs per token), then sleep.
    spin_until([&] { return epoch_.load(std::memory_order_acquire) != seen; }, std::chrono::microseconds(200));
    uint64_t e = epoch_.load(std::memory_order_acquire);
    if (e == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return epoch_.load(std::memory_order_acquire) != seen || stop_; });
      e = epoch_.load(std::memory_order_acquire);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    seen = e;
    run_range(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int, int64_t, int64_t)>& fn) {
  run_job(n, grain, false, fn);
}

void ThreadPool::parallel_for_balanced(int64_t n, int64_t grain, const std::function<void(int, int64_t, int64_t)>& fn) {
  run_job(n, grain, true, fn);
}

void ThreadPool::run_job(int64_t n, int64_t grain, bool balanced,
                         const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t grains = (n + grain - 1) / grain;
  if (workers_.empty() || grains == 1) {
    fn(0, 0, n);
    return;
  }
  if (grains > static_cast<int64_t>(span_back(~uint64_t{0}))) balanced = false;  // spans count grains in 32 bits
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    job_parts_ = size();
    job_balanced_ = balanced;
    if (balanced) {
      for (int wi = 0; wi < job_parts_; ++wi) {
        int64_t g0 = 0, g1 = 0;
        static_part(grains, job_parts_, wi, g0, g1);
        spans_[static_cast<size_t>(wi)].bounds.store(pack_span(static_cast<uint64_t>(g0), static_cast<uint64_t>(g1)),
                                                     std::memory_order_relaxed);
      }
      job_min_chunk_ = std::max<int64_t>(1, grains / job_parts_ / kBalancedMinChunkDivisor);
    }
    error_ = nullptr;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_range(0);
  // Wait for the workers: spin first, then sleep.
  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; }, std::chrono::microseconds(100))) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace specula
