#pragma once
// One persistent pool of worker threads. Work is split statically into contiguous ranges, one per
// thread, so the same call always gives each thread the same range: kernels parallelize over
// output columns/rows/heads and never split a reduction, which keeps results bitwise independent
// of the thread count (batch-invariance contract, DESIGN.md §3).
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
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int worker, int64_t begin, int64_t end)>& fn);

  // The process-wide default pool (created on first use with hardware_concurrency threads).
  static ThreadPool& global();

 private:
  void worker_loop(int index);
  void run_range(int worker);

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
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace specula
