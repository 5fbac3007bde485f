#include "comm/comm_thread.hpp"

#include <chrono>

namespace holmes::comm {

CommThread::CommThread() : thread_([this] { run(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_future<void> CommThread::submit(std::function<void()> op) {
  std::packaged_task<void()> task(std::move(op));
  std::shared_future<void> done = task.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // What finished without failing is forgotten: drain() reports failures only, and a group
    // that is never drained (diloco's outer group, whose per-step sum is landed through its
    // future) would otherwise keep one future for every operation of the run.
    while (!pending_.empty() && pending_.front().wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      try {
        pending_.front().get();
      } catch (...) {
        break;  // kept for drain() to rethrow
      }
      pending_.pop_front();
    }
    queue_.push_back(std::move(task));
    pending_.push_back(done);
  }
  cv_.notify_all();
  return done;
}

void CommThread::drain() {
  std::deque<std::shared_future<void>> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(pending_);
  }
  for (auto& f : waiting) f.wait();
  for (auto& f : waiting) f.get();  // rethrows the first failure, in submission order
}

void CommThread::cancel() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.clear();  // a packaged_task destroyed unrun breaks its promise
    pending_.clear();
  }
  // Runs after the operation in progress: once it ran, nothing of the earlier work is left.
  submit([] {}).wait();
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
}

size_t CommThread::unreported() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

void CommThread::run() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // a packaged_task stores the exception in its future
  }
}

}  // namespace holmes::comm
