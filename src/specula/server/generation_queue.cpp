#include "specula/server/generation_queue.h"

#include <algorithm>
#include <exception>

namespace specula::server {

bool GenerationQueue::Job::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return finished_; });
  return ran_;
}

bool GenerationQueue::Job::started() const {
  std::lock_guard lock(mutex_);
  return started_;
}

std::string GenerationQueue::Job::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

GenerationQueue::GenerationQueue(size_t max_waiting, size_t workers) : max_waiting_(max_waiting) {
  for (size_t i = 0; i < std::max<size_t>(workers, 1); ++i) workers_.emplace_back([this] { run(); });
}

GenerationQueue::~GenerationQueue() { shutdown(); }

std::shared_ptr<GenerationQueue::Job> GenerationQueue::submit(Work work) {
  auto job = std::make_shared<Job>();
  job->work_ = std::move(work);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return nullptr;
    const size_t free_workers = workers_.size() - running_.size();
    if (waiting_.size() >= free_workers + max_waiting_) return nullptr;
    waiting_.push_back(job);
  }
  cv_.notify_all();
  return job;
}

void GenerationQueue::cancel(const std::shared_ptr<Job>& job) {
  job->cancelled = true;
  bool dropped = false;
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find(waiting_.begin(), waiting_.end(), job);
    if (it != waiting_.end()) {
      waiting_.erase(it);
      dropped = true;
    }
  }
  if (dropped) finish(*job, false, {});
}

size_t GenerationQueue::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

size_t GenerationQueue::running() const {
  std::lock_guard lock(mutex_);
  return running_.size();
}

bool GenerationQueue::busy() const { return running() > 0; }

void GenerationQueue::shutdown() {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(waiting_);
    for (auto& job : running_) job->cancelled = true;
  }
  cv_.notify_all();
  for (auto& job : dropped) {
    job->cancelled = true;
    finish(*job, false, {});
  }
  for (std::thread& w : workers_)
    if (w.joinable()) w.join();
}

void GenerationQueue::finish(Job& job, bool ran, std::string error) {
  {
    std::lock_guard lock(job.mutex_);
    job.finished_ = true;
    job.ran_ = ran;
    job.error_ = std::move(error);
  }
  job.cv_.notify_all();
}

void GenerationQueue::run() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
      if (stopping_) return;
      job = waiting_.front();
      waiting_.pop_front();
      running_.push_back(job);
    }
    {
      std::lock_guard lock(job->mutex_);
      job->started_ = true;
    }
    std::string error;
    try {
      job->work_(job->cancelled);
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown error";
    }
    job->work_ = nullptr;  // release what the work captured before waking the waiter
    {
      std::lock_guard lock(mutex_);
      std::erase(running_, job);
    }
    finish(*job, true, std::move(error));
  }
}

}  // namespace specula::server
