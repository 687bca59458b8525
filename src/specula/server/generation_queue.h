#pragma once
// A bounded FIFO of generation jobs served by `workers` threads (one per engine slot: the engine
// batches the generations they run, engine/scheduler.h). Each job has a cancel flag its work polls
// (the engine callback returns false once it is set); a job cancelled while still waiting is
// dropped from the queue without running.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace specula::server {

class GenerationQueue {
 public:
  using Work = std::function<void(const std::atomic<bool>& cancelled)>;

  class Job {
   public:
    std::atomic<bool> cancelled{false};
    // Blocks until the job ran or was dropped; true when it ran (its work returned or threw).
    bool wait();
    // As wait(), giving up after `timeout`; nullopt while still waiting or running.
    template <class Rep, class Period>
    std::optional<bool> wait_for(std::chrono::duration<Rep, Period> timeout) {
      std::unique_lock lock(mutex_);
      if (!cv_.wait_for(lock, timeout, [&] { return finished_; })) return std::nullopt;
      return ran_;
    }
    bool started() const;
    // What the work threw, if anything (the worker catches it so one bad job cannot stop it).
    std::string error() const;

   private:
    friend class GenerationQueue;
    Work work_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    bool started_ = false;
    bool finished_ = false;
    bool ran_ = false;
    std::string error_;
  };

  // max_waiting: jobs allowed to wait while every worker is busy (0: accept only when one is free).
  explicit GenerationQueue(size_t max_waiting, size_t workers = 1);
  ~GenerationQueue();
  GenerationQueue(const GenerationQueue&) = delete;
  GenerationQueue& operator=(const GenerationQueue&) = delete;

  // Queues `work`; nullptr when the queue is full or shut down.
  std::shared_ptr<Job> submit(Work work);
  // Sets the job's cancel flag; a job still waiting is removed and finishes without running.
  void cancel(const std::shared_ptr<Job>& job);
  size_t waiting() const;
  size_t running() const;
  bool busy() const;
  // Cancels every job, drops the waiting ones, joins the worker. Idempotent.
  void shutdown();

 private:
  void run();
  static void finish(Job& job, bool ran, std::string error);

  const size_t max_waiting_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> waiting_;
  std::vector<std::shared_ptr<Job>> running_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace specula::server
