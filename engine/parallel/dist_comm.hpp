// Communication pieces of the trainer (trainer.hpp): where this rank sits
// in the tensor x pipeline x data grid, a clock for the time it spends blocked on
// communication, the model's tensor-parallel calls over a ProcessGroup, and a sum of a few
// doubles over several groups.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "comm/process_group.hpp"
#include "device/device_memory.hpp"
#include "model/tp_comm.hpp"

namespace holmes::parallel {

struct ParallelContext {
  int tp_rank = 0, tp_size = 1, pp_stage = 0, pp_size = 1, dp_rank = 0, dp_size = 1;
  int first_layer = 0, num_layers = -1;      // this stage's layers (from the plan's partition)
  comm::ProcessGroup* tp = nullptr;          // group rank == tp_rank; nullptr iff tp_size == 1
  comm::ProcessGroup* pp = nullptr;          // group rank == pp_stage; nullptr iff pp_size == 1
  comm::ProcessGroup* dp = nullptr;          // group rank == dp_rank; nullptr iff dp_size == 1
  comm::ProcessGroup* embedding = nullptr;   // {first stage, last stage} of this pipeline
                                             // (same tp, dp); group rank 0 = first; pp > 1 only
  int bucket_mb = 0;                         // DP gradient bucket size (MiB), 0 = default (8)
  size_t bucket_floats = 0;                  // > 0: bucket size in floats, overrides bucket_mb
                                             // (tests use buckets smaller than 1 MiB)
  // The backend's queue (device::DeviceMemory::stream(); set by the trainer): collectives on
  // its buffers are ordered with its kernels there. Null on the CPU, whose calls complete in
  // order; the NCCL groups enqueue on it.
  void* stream = nullptr;
  // NCCL groups with the same members as tp, pp, dp and embedding (engine/parallel/device_groups),
  // or null: the trainer sends device buffers through them and host buffers through the groups
  // above. With a dp device group the main thread enqueues the DP reduce-scatters in program
  // order on the backend's side queue (no communication thread: two threads enqueueing on
  // NCCL communicators could order them differently on different ranks).
  comm::ProcessGroup* tp_device = nullptr;
  comm::ProcessGroup* pp_device = nullptr;
  comm::ProcessGroup* dp_device = nullptr;
  comm::ProcessGroup* embedding_device = nullptr;
};

// Throws std::invalid_argument (a wiring error of the runtime, not user input) when the
// groups do not match the coordinates (size, rank, nullptr iff degree 1).
void check_context(const ParallelContext& ctx);

// Milliseconds this rank spent waiting on communication (main thread only): inside blocking
// calls, timed on the host; and communication queued on a device queue (NCCL calls on the
// compute stream, the compute stream waiting for the side stream's reduce-scatters or
// all-gathers), timed by the device between two timed fences and read by settle().
class CommClock {
 public:
  template <class F>
  void time(F&& op) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  // `op` enqueues communication on `queue` and returns at once. Where the memory keeps no
  // device time (the CPU), it is timed on the host instead.
  template <class F>
  void time_queued(device::DeviceMemory& mem, void* queue, F&& op) {
    std::shared_ptr<device::QueueFence> start = mem.timed_fence_on(queue);
    if (!start) return time(std::forward<F>(op));
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

// model::TensorParallelComm over the TP ProcessGroup; its all-reduces count as blocked time.
class GroupTensorParallel final : public model::TensorParallelComm {
 public:
  // stream: the queue the model's kernels run on (ParallelContext::stream). queued: the
  // backend's memory when the group enqueues on that stream (an NCCL group), so the device
  // times the all-reduces; null when they block the host.
  GroupTensorParallel(comm::ProcessGroup& group, CommClock& clock, void* stream = nullptr,
                      device::DeviceMemory* queued = nullptr)
      : group_(group), clock_(clock), stream_(stream), queued_(queued) {}
  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  void all_reduce_sum(float* data, size_t count) override;
  void all_reduce_max(float* data, size_t count) override;

 private:
  comm::ProcessGroup& group_;
  CommClock& clock_;
  void* stream_;  // the kernels' queue: NCCL enqueues there; Gloo calls complete in order without it
  device::DeviceMemory* queued_;
  template <class F>
  void timed(F&& op);
};

// values[i] <- sum over every member of every group in `groups` (nullptr entries skipped),
// reduced group after group. Each double travels as two floats (high part + rounding rest)
// so no member's value is rounded to float before the sum; the sum of the high parts is
// still a float sum (~1e-7 relative), plenty for a loss or a gradient norm.
void sum_doubles(std::span<double> values, std::span<comm::ProcessGroup* const> groups, CommClock& clock);

}  // namespace holmes::parallel
