// A thread that runs communication operations in submission order, so the data-parallel
// reduce-scatter of a gradient bucket can run while backward computes the next bucket.
// CPU groups are synchronous and not safe to call from two threads at once: while work is
// queued, only this thread may use the groups that work touches.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace holmes::comm {

class CommThread {
 public:
  CommThread();
  // Runs what is queued, then stops. Errors of work nobody waited for are dropped: wait
  // on every future (or call drain()) to see them.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `op`; the future is ready when it ran, and get() rethrows its exception
  // (a CommError when the operation failed).
  std::shared_future<void> submit(std::function<void()> op);
  // Waits for everything submitted so far; rethrows the first failure among them.
  void drain();
  // Drops the work queued that has not started (waiting on its future throws
  // std::future_error, broken_promise) and waits for the operation running, if any, without
  // rethrowing anything: after a failure elsewhere, what is queued would only sit out its
  // time-outs before the failure is reported.
  void cancel();
  // Operations drain() would still wait for or report: those not finished, and failures
  // nobody drained (what finished without failing is forgotten at the next submit).
  size_t unreported();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;
  std::deque<std::shared_future<void>> pending_;  // for drain()
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace holmes::comm
