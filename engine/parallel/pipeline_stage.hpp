// One pipeline stage's share of a training step: runs a step list of schedule.hpp (1F1B or
// ZB-H1, whose backward runs as B and W passes of the model) over the model shard, moving activations (B,T,C) forward and their gradients back through
// the pipeline group. Activation memory: the model holds one activation set ("slot") per
// micro-batch in flight on this stage (slot = micro % max_in_flight), so nothing is
// recomputed; received and to-be-sent tensors live in a small pool of (B,T,C) buffers that
// is only as large as the schedule needs at once (allocated during the first step).
// Transfers run beside the compute: each comm step of the schedule is posted to the pipeline
// group as one send_recv, in schedule order, so the deadlock argument of schedule.hpp holds
// unchanged (the posts run in the order the synchronous stage made them; only the compute no
// longer waits for sends). The group decides how bytes travel (group.hpp); the stage only
// keeps the order: a sent buffer returns to the pool once its send no longer reads it, a
// received one is landed just before it is read.
#pragma once

#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engine/parallel/groups.hpp"
#include "engine/parallel/schedule.hpp"
#include "model/gpt.hpp"

namespace holmes::parallel {

class PipelineStage {
 public:
  // fetch(micro, inputs, targets) fills the (B,T) tokens and targets of micro-batch `micro`.
  using FetchFn = std::function<void(int micro, int32_t* inputs, int32_t* targets)>;
  // The (B,T,C) buffers of a micro-batch: received input, output to send, received output
  // gradient, input gradient to send.
  enum Tensor { kActIn, kActOut, kGradIn, kGradOut };

  // gpt must have max_in_flight(schedule, pp_size, pp_stage, micro_batches) slots and split its
  // backward exactly when the schedule has W passes (zb-h1); groups outlive the stage.
  PipelineStage(model::Gpt& gpt, ParallelGroups& groups, int micro_batches, int B, int T,
                PipeSchedule schedule = PipeSchedule::k1f1b);

  // The step's forward and backward passes of every micro-batch (gradients accumulate in
  // gpt.grads(), each micro-batch's loss scaled by 1/micro_batches). before_grads(micro) runs
  // just before each pass that completes gradient ranges (the model's grad-ready hook): the
  // backward of `micro`, or its W pass when the schedule splits backward; these come in
  // micro-batch order. Returns the sum of the micro-batch losses on the last stage, 0 on the
  // others.
  double run_step(const FetchFn& fetch, const std::function<void(int micro)>& before_grads);
  // Forward only over `count` micro-batches in order (validation); same return value.
  double run_forward(int count, const FetchFn& fetch);
  // Seconds the last run_step / run_forward spent computing (the model's forward and backward
  // passes, without waiting on communication): what a calibration divides the FLOPs by.
  double compute_s() const { return compute_s_; }

 private:
  void reset();
  void forward(int micro, const FetchFn& fetch);
  void backward(int micro);
  void weights(int micro);  // W of a split backward
  void exchange(const std::vector<PipeTransfer>& transfers);
  // Takes the slot of `micro` (forward), selects it (B of a split backward) or frees it.
  enum class SlotUse { kTake, kSelect, kFree };
  void use_slot(int micro, SlotUse use);
  size_t buffer_bytes() const;  // one (B,T,C) buffer
  device::DeviceArray<float>& acquire(Tensor kind, int micro);
  device::DeviceArray<float>& held(Tensor kind, int micro);
  void release(Tensor kind, int micro);
  // Buffers whose send has ended go back to the pool; with `wait_oldest`, waits for the
  // oldest send first.
  void reclaim(bool wait_oldest);
  // End of a step: waits for every transfer; throws when a buffer was left over.
  void finish_transfers();
  // Before anything reads `data`, a buffer a transfer received into: lands the transfer.
  void await(const float* data);

  model::Gpt& gpt_;
  ParallelGroups& groups_;
  const int stage_;
  int micro_batches_, B_, T_;
  bool first_, last_;
  bool split_ = false;  // the schedule has W passes: backward runs B, a later step W
  std::vector<PipeStep> steps_;
  std::vector<int> slot_micro_;  // micro-batch occupying each model slot, -1 = free
  std::vector<int32_t> inputs_, targets_;
  // (Tensor, micro) -> (B,T,C) in the backend's memory, from a pool of free ones.
  std::map<std::pair<int, int>, device::DeviceArray<float>> live_;
  std::vector<device::DeviceArray<float>> free_;
  // Sent buffers still read by their transfer, oldest first, and the most kept so.
  std::deque<std::pair<std::shared_future<void>, device::DeviceArray<float>>> sending_;
  size_t max_sending_ = 2;
  std::map<const float*, Work> receiving_;  // received into, not yet landed
  double loss_sum_ = 0;
  double compute_s_ = 0;
};

}  // namespace holmes::parallel
