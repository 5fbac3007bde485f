// One pipeline stage's share of a training step: runs a step list of schedule.hpp (1F1B,
// ZB-H1, whose backward runs as B and W passes of the model, or interleaved 1F1B over
// several model chunks) over the model shard, moving activations (B,T,C) forward and their
// gradients back through the pipeline group. Activation memory: each model chunk holds one
// activation set ("slot") per micro-batch in flight on it (slot = micro % its
// max_in_flight), each keeping what its recompute mode leaves; received and to-be-sent
// tensors live in a small pool of (B,T,C) buffers that
// is only as large as the schedule needs at once (allocated during the first step).
// Transfers run beside the compute: each comm step of the schedule is posted to the pipeline
// group as one send_recv, in schedule order, so the deadlock argument of schedule.hpp holds
// unchanged (the posts run in the order the synchronous stage made them; only the compute no
// longer waits for sends). The group decides how bytes travel (group.hpp); the stage only
// keeps the order: a sent buffer returns to the pool once its send no longer reads it, a
// received one is landed just before it is read.
// Under tensor parallelism every tp rank of a stage holds the same boundary tensor; as in
// Megatron-LM's scatter/gather, each sends only its 1/t slice across the hop (to the same tp
// rank of the neighbouring stage), and the receiving stage all-gathers the slices over its tp
// group before it reads the tensor: the hop, often the slow link, carries A/t per rank, which
// is what the planner prices. The tensor is the same bits either way.
#pragma once

#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/parallel/groups.hpp"
#include "engine/schedule/rank_plan.hpp"
#include "engine/schedule/schedule.hpp"
#include "model/gpt.hpp"

namespace holmes::parallel {

class PipelineStage {
 public:
  // fetch(micro, inputs, targets, positions) fills the (B,T) tokens and targets of micro-batch
  // `micro`, and with document masking (the model's policy().document_mask) its (B,T)
  // positions in their documents, which every stage needs (positions is null otherwise).
  using FetchFn = std::function<void(int micro, int32_t* inputs, int32_t* targets, int32_t* positions)>;
  // The (B,T,C) buffers of a micro-batch: received input, output to send, received output
  // gradient, input gradient to send.
  enum Tensor { kActIn, kActOut, kGradIn, kGradOut };

  // chunks[c] is model chunk c of this stage as the plan lays them out (one, or V under the
  // interleaved schedule: virtual stage c * pp_size + pp_stage; embedding only in virtual stage
  // 0, head only in the last), with max_in_flight(plan.steps, c) slots each and a backward
  // split exactly when the plan's table has W passes. The stage runs plan.steps over
  // plan.micro_batches micro-batches of (plan.micro_batch, plan.seq_len). groups and plan
  // outlive the stage.
  PipelineStage(std::vector<model::Gpt*> chunks, ParallelGroups& groups, const schedule::RankPlan& plan);

  // The step's forward and backward passes of every micro-batch (gradients accumulate in
  // each chunk's grads(), each micro-batch's loss scaled by 1/micro_batches).
  // before_grads(chunk, micro) runs just before each pass that completes gradient ranges of
  // that chunk (the model's grad-ready hook): the backward of `micro`, or its W pass when the
  // schedule splits backward (its B when the W follows at once: joins_weights); per chunk
  // these come in micro-batch order. Returns the sum of
  // the micro-batch losses on the stage holding the last virtual stage, 0 on the others.
  double run_step(const FetchFn& fetch, const std::function<void(int chunk, int micro)>& before_grads);
  // Forward only over `count` micro-batches in order (validation); same return value.
  double run_forward(int count, const FetchFn& fetch);
  // Every micro-batch's loss counts `scale` times in run_step's gradients (the trainer's
  // loss over the targets that count; 1 by default).
  void set_loss_scale(float scale) { loss_scale_ = scale; }
  // Test hook (HOLMES_TEST_SLOW_RANK, the trainer reads it): every forward pass also sleeps
  // `ms` inside its timed compute, a rank made persistently slower than its peers.
  void set_test_pass_delay_ms(int ms) { test_delay_ms_ = ms; }
  // Seconds the last run_step / run_forward spent computing (the model's forward and backward
  // passes, without waiting on communication): what a calibration divides the FLOPs by.
  double compute_s() const { return compute_s_; }
  // Seconds the last run_step's passes took, with what they waited for inside (tensor-parallel
  // sums, the parameters' all-gathers landing in a forward), and spent blocked on the
  // pipeline's receives (a received tensor that had not arrived when a pass needed it): the
  // pipeline phase is these two and the stage's own copies and posts.
  double pass_s() const { return pass_s_; }
  double receive_wait_s() const { return receive_wait_s_; }

 private:
  void reset();
  void forward(int chunk, int micro, const FetchFn& fetch);
  // pass: kAll (the whole backward), or kInput (B of a split backward, whose W comes later).
  void backward(int chunk, int micro, model::Pass pass);
  void weights(int chunk, int micro);  // W of a split backward
  void exchange(const std::vector<schedule::PipeTransfer>& transfers);
  // Takes the slot of `micro` (forward), selects it (B of a split backward) or frees it.
  enum class SlotUse { kTake, kSelect, kFree };
  void use_slot(int chunk, int micro, SlotUse use);
  // Chunk c holds the first / last virtual stage (reads tokens / computes the loss).
  bool first(int chunk) const { return stage_ == 0 && chunk == 0; }
  bool last(int chunk) const { return stage_ == pp_size_ - 1 && chunk + 1 == static_cast<int>(chunks_.size()); }
  bool holds_last() const { return last(static_cast<int>(chunks_.size()) - 1); }
  size_t buffer_bytes() const;  // one (B,T,C) buffer
  // Under tensor parallelism t: the floats of the slice a tp rank sends and receives,
  // ceil(boundary / t), and a pool buffer's floats, t slices (the padding is zero).
  size_t slice_floats() const;
  size_t pool_floats() const { return slice_floats() * static_cast<size_t>(groups_.group(schedule::Axis::kTp).size()); }
  using Key = std::tuple<int, int, int>;  // (Tensor, chunk, micro)
  device::DeviceArray<float>& acquire(Key key);
  device::DeviceArray<float>& held(Key key);
  void release(Key key);
  // Buffers whose send has ended go back to the pool; with `wait_oldest`, waits for the
  // oldest send first.
  void reclaim(bool wait_oldest);
  // End of a step: waits for every transfer; throws when a buffer was left over.
  void finish_transfers();
  // Before anything reads `data`, a buffer a transfer received into: lands the transfer.
  void await(const float* data);

  std::vector<model::Gpt*> chunks_;
  model::Gpt& gpt_;  // chunk 0: backend and sizes, the same for every chunk
  ParallelGroups& groups_;
  const int stage_, pp_size_;
  int micro_batches_, B_, T_;
  bool split_ = false;  // the schedule has W passes: backward runs B, a later step W
  const std::vector<schedule::PipeStep>& steps_;  // the plan's table
  std::vector<std::vector<int>> slot_micro_;  // [chunk][slot]: micro-batch occupying it, -1 = free
  std::vector<int32_t> inputs_, targets_, positions_;
  float loss_scale_ = 1.0f;
  int test_delay_ms_ = 0;
  // (Tensor, chunk, micro) -> (B,T,C) in the backend's memory, from a pool of free ones.
  std::map<Key, device::DeviceArray<float>> live_;
  std::vector<device::DeviceArray<float>> free_;
  // Sent buffers still read by their transfer, oldest first, and the most kept so.
  std::deque<std::pair<std::shared_future<void>, device::DeviceArray<float>>> sending_;
  size_t max_sending_ = 2;
  // Received into, not yet landed; `gather`: a tp rank's slice, all-gathered before it is read.
  struct Receiving {
    Work work;
    bool gather = false;
  };
  std::map<const float*, Receiving> receiving_;
  device::DeviceArray<float> gather_in_;  // this rank's received slice, the all-gather's input
  double loss_sum_ = 0;
  double compute_s_ = 0;
  double receive_wait_s_ = 0;
  double pass_s_ = 0;
};

}  // namespace holmes::parallel
