#pragma once
// One persistent pool of worker threads. Work is split into contiguous ranges: parallel_for gives
// each thread the same range on every call, parallel_for_balanced lets a thread that finishes early
// take over the end of another's. Either way kernels parallelize over output columns/rows/heads
// and never split a reduction, which keeps results bitwise independent of the thread count and of
// which thread ran what (batch-invariance contract, docs/architecture.md §3).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specula {

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread. The calling thread is worker 0.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(worker, begin, end) on disjoint ranges covering [0, n). Range boundaries are
  // multiples of `grain` (except the end). Blocks until all are done; rethrows the first exception.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int worker, int64_t begin, int64_t end)>& fn);

  // Like parallel_for, for work whose bytes do not depend on which thread computes which range
  // (a matmul's output rows): each worker starts on the range parallel_for would give it and claims
  // it front to back in shrinking chunks; a worker that runs out takes chunks off the back of the
  // range with the most left. A thread that falls behind (a slower stretch of memory, a preempted
  // vCPU) then no longer leaves the others waiting at the end of every call. fn may be called
  // several times per worker, always with whole grains.
  void parallel_for_balanced(int64_t n, int64_t grain,
                             const std::function<void(int worker, int64_t begin, int64_t end)>& fn);

  // The process-wide default pool (created on first use with hardware_concurrency threads).
  static ThreadPool& global();

 private:
  void worker_loop(int index);
  void run_range(int worker);
  void run_balanced(int worker);
  void run_job(int64_t n, int64_t grain, bool balanced, const std::function<void(int, int64_t, int64_t)>& fn);
  void call(int worker, int64_t begin, int64_t end);

  // A worker's part of a balanced job, in grains: [front, back) still unclaimed, packed in one word
  // (front << 32 | back) so that the owner (taking from the front) and a thief (taking from the
  // back) claim with one compare-exchange. One cache line each.
  struct alignas(64) Span {
    std::atomic<uint64_t> bounds{0};
  };

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;

  // The job of the current epoch.
  const std::function<void(int, int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  int job_parts_ = 1;
  bool job_balanced_ = false;
  int64_t job_min_chunk_ = 1;  // in grains
  std::vector<Span> spans_;    // one per worker
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace specula
