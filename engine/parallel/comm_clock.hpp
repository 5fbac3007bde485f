// The time this rank spends waiting on communication (main thread only): inside blocking
// calls, timed on the host; and communication queued on a device queue (NCCL calls on the
// compute stream, the compute stream waiting for the side stream), timed by the device
// between two timed fences and read by settle(). The trainer reports it per step and leaves it
// out of the compute time a calibration measures.
#pragma once

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "device/device_memory.hpp"

namespace holmes::parallel {

class CommClock {
 public:
  // Runs `op`, adds its host time to ms() and returns it in seconds.
  template <class F>
  double time(F&& op) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ms_ += 1e3 * s;
    return s;
  }
  // `op` enqueues communication on `queue` and returns at once. Where the memory keeps no
  // device time (the CPU), it is timed on the host instead.
  template <class F>
  void time_queued(device::DeviceMemory& mem, void* queue, F&& op) {
    std::shared_ptr<device::QueueFence> start = mem.timed_fence_on(queue);
    if (!start) {
      time(std::forward<F>(op));
      return;
    }
    op();
    spans_.push_back({std::move(start), mem.timed_fence_on(queue)});
  }
  // Adds the device spans queued so far to ms() (waiting until the device passed them: call
  // once the queue is idle anyway) and returns their milliseconds.
  double settle() {
    double sum = 0;
    for (auto& [start, end] : spans_) {
      end->wait();
      sum += end->ms_since(*start);
    }
    spans_.clear();
    ms_ += sum;
    return sum;
  }
  double ms() const { return ms_; }
  void reset() {
    ms_ = 0;
    spans_.clear();
  }

 private:
  double ms_ = 0;
  std::vector<std::pair<std::shared_ptr<device::QueueFence>, std::shared_ptr<device::QueueFence>>> spans_;
};

}  // namespace holmes::parallel
