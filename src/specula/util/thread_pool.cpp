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

void ThreadPool::run_range(int worker) {
  if (worker >= job_parts_) return;
  // Split [0, n) into job_parts_ contiguous chunks of whole grains.
  const int64_t grains = (job_n_ + job_grain_ - 1) / job_grain_;
  const int64_t per = grains / job_parts_;
  const int64_t extra = grains % job_parts_;
  const int64_t g0 = worker * per + std::min<int64_t>(worker, extra);
  const int64_t g1 = g0 + per + (worker < extra ? 1 : 0);
  const int64_t begin = std::min(job_n_, g0 * job_grain_);
  const int64_t end = std::min(job_n_, g1 * job_grain_);
  if (begin >= end) return;
  try {
    (*job_)(worker, begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
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

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t grains = (n + grain - 1) / grain;
  if (workers_.empty() || grains == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    job_parts_ = size();
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
