#include "comm/comm_thread.hpp"

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
