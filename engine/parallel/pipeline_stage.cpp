#include "engine/parallel/pipeline_stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace holmes::parallel {

PipelineStage::PipelineStage(model::Gpt& gpt, ParallelGroups& groups, int micro_batches, int B, int T,
                             PipeSchedule schedule)
    : gpt_(gpt), groups_(groups), stage_(groups.coords().pp_stage), micro_batches_(micro_batches), B_(B), T_(T),
      first_(stage_ == 0), last_(stage_ == groups.coords().pp_size - 1) {
  const int pp = groups.coords().pp_size;
  steps_ = schedule_steps(schedule, pp, stage_, micro_batches);
  split_ = std::any_of(steps_.begin(), steps_.end(), [](const PipeStep& s) { return s.kind == PipeOpKind::kWeights; });
  const int slots = max_in_flight(steps_);
  if (gpt.slots() != slots)
    throw std::logic_error(fmt::format("PipelineStage: the model has {} activation slots, stage {} of {} keeps {} "
                                       "micro-batches in flight under {}", gpt.slots(), stage_, pp, slots,
                                       pipe_schedule_name(schedule)));
  if (gpt.policy().split_backward != split_)
    throw std::logic_error(fmt::format("PipelineStage: schedule {} {} a split backward, the model {}",
                                       pipe_schedule_name(schedule), split_ ? "needs" : "does not run",
                                       gpt.policy().split_backward ? "splits" : "does not"));
  slot_micro_.assign(slots, -1);
  max_sending_ = static_cast<size_t>(std::max(slots, 2));
  inputs_.resize(static_cast<size_t>(B) * T);
  targets_.resize(inputs_.size());
}

void PipelineStage::reset() {
  // A step that failed half-way (a CommError) may have left transfers queued and buffers and
  // slots taken.
  groups_.pp().abandon();
  receiving_.clear();
  for (auto& [key, buf] : live_) free_.push_back(std::move(buf));
  live_.clear();
  for (auto& [done, buf] : sending_) free_.push_back(std::move(buf));
  sending_.clear();
  std::fill(slot_micro_.begin(), slot_micro_.end(), -1);
  if (last_) gpt_.take_loss_sum();  // drops what a failed step left
  loss_sum_ = 0;
  compute_s_ = 0;
}

namespace {

// Adds the seconds `op` took to `seconds`, less what it spent blocked in communication on
// `clock` (tensor-parallel sums, parameter all-gathers landing inside a forward): compute
// alone, which is what a calibration divides the FLOPs by.
template <class F>
void timed(double& seconds, const CommClock& clock, F&& op) {
  const auto t0 = std::chrono::steady_clock::now();
  const double comm0 = clock.ms();
  op();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  seconds += std::max(0.0, s - (clock.ms() - comm0) / 1e3);
}

}  // namespace

double PipelineStage::run_step(const FetchFn& fetch, const std::function<void(int micro)>& before_grads) {
  reset();
  for (const PipeStep& s : steps_) {
    if (s.kind == PipeOpKind::kComm) {
      exchange(s.transfers);
      continue;
    }
    if (!s.transfers.empty())
      throw std::logic_error("PipelineStage: transfers belong to kComm steps of the schedule");
    switch (s.kind) {
      case PipeOpKind::kForward: forward(s.micro, fetch); break;
      case PipeOpKind::kBackward:
        if (!split_) before_grads(s.micro);
        backward(s.micro);
        break;
      case PipeOpKind::kWeights:
        before_grads(s.micro);
        weights(s.micro);
        break;
      case PipeOpKind::kComm: break;
    }
  }
  finish_transfers();
  // On a GPU the last backward's kernels are still queued: wait for them inside the compute
  // time, so it measures the device's work (a no-op on the CPU).
  timed(compute_s_, groups_.clock(), [&] { gpt_.backend().memory->synchronize(); });
  // Communication the device ran on the compute stream (NCCL groups) is in the passes' time:
  // it was not compute.
  compute_s_ = std::max(0.0, compute_s_ - groups_.clock().settle() / 1e3);
  // The micro-batches' losses, read once per step (the device is idle by now).
  if (last_) loss_sum_ = gpt_.take_loss_sum();
  return loss_sum_;
}

double PipelineStage::run_forward(int count, const FetchFn& fetch) {
  // Plain in-order hand-off: recv, forward, send. A stage blocks only on its neighbours and
  // the chain has no cycle, so rendezvous sends cannot deadlock.
  reset();
  for (int e = 0; e < count; ++e) {
    if (!first_) exchange({{P2PKind::kRecvActivation, e, stage_ - 1}});
    forward(e, fetch);
    if (!last_) exchange({{P2PKind::kSendActivation, e, stage_ + 1}});
    slot_micro_[e % slot_micro_.size()] = -1;  // no backward follows
  }
  finish_transfers();
  if (last_) loss_sum_ = gpt_.take_loss_sum();
  compute_s_ = std::max(0.0, compute_s_ - groups_.clock().settle() / 1e3);
  return loss_sum_;
}

void PipelineStage::finish_transfers() {
  groups_.pp().drain();
  if (!receiving_.empty())  // a schedule that never reads a received tensor is a bug
    throw std::logic_error(fmt::format("PipelineStage: stage {} ended the step with {} receives never read", stage_,
                                       receiving_.size()));
  reclaim(false);
  if (!sending_.empty() || !live_.empty())  // a schedule that leaves a transfer unmatched is a bug, not a hang
    throw std::logic_error(fmt::format("PipelineStage: stage {} ended the step with {} unsent or unused buffers",
                                       stage_, live_.size() + sending_.size()));
}

void PipelineStage::use_slot(int micro, SlotUse use) {
  const int slot = micro % static_cast<int>(slot_micro_.size());
  const int want = use == SlotUse::kTake ? -1 : micro;
  if (slot_micro_[slot] != want)
    throw std::logic_error(fmt::format("PipelineStage: stage {} {} micro-batch {} in slot {} held by {}", stage_,
                                       use == SlotUse::kTake ? "forward of" : "backward of", micro, slot,
                                       slot_micro_[slot]));
  slot_micro_[slot] = use == SlotUse::kTake ? micro : use == SlotUse::kSelect ? micro : -1;
  gpt_.set_slot(slot);
}

void PipelineStage::forward(int micro, const FetchFn& fetch) {
  if (first_ || last_) fetch(micro, inputs_.data(), targets_.data());
  use_slot(micro, SlotUse::kTake);
  const float* input = first_ ? nullptr : held(kActIn, micro).data();
  if (input != nullptr) await(input);
  timed(compute_s_, groups_.clock(), [&] {
    gpt_.forward_stage(first_ ? inputs_.data() : nullptr, input, last_ ? targets_.data() : nullptr, B_, T_);
  });
  if (!first_) release(kActIn, micro);  // the model copied it into the slot
  if (!last_) {
    gpt_.backend().memory->copy(acquire(kActOut, micro).data(), gpt_.output(), buffer_bytes());
  }
}

void PipelineStage::backward(int micro) {
  // A split backward keeps the slot (W reads it) and runs B alone here.
  use_slot(micro, split_ ? SlotUse::kSelect : SlotUse::kFree);
  const model::Pass pass = split_ ? model::Pass::kInput : model::Pass::kAll;
  if (last_) {
    timed(compute_s_, groups_.clock(), [&] { gpt_.backward(1.0f / static_cast<float>(micro_batches_), pass); });  // mean over micro-batches
  } else {
    const float* grad = held(kGradIn, micro).data();
    await(grad);
    timed(compute_s_, groups_.clock(), [&] { gpt_.backward_stage(grad, pass); });
    release(kGradIn, micro);
  }
  if (!first_) {
    gpt_.backend().memory->copy(acquire(kGradOut, micro).data(), gpt_.input_grad(), buffer_bytes());
  }
}

void PipelineStage::weights(int micro) {
  use_slot(micro, SlotUse::kFree);
  timed(compute_s_, groups_.clock(), [&] { gpt_.backward_weights(); });
}

namespace {

// Which buffer a transfer moves and in which direction. Both ends tag a transfer by its
// direction and micro-batch (the send kind), so tags match whatever p2p_tag gives recvs.
struct Route {
  PipelineStage::Tensor buf;
  comm::P2POp::Kind op;
  P2PKind tag_kind;
};

Route route_of(P2PKind kind) {
  switch (kind) {
    case P2PKind::kSendActivation: return {PipelineStage::kActOut, comm::P2POp::kSend, P2PKind::kSendActivation};
    case P2PKind::kRecvActivation: return {PipelineStage::kActIn, comm::P2POp::kRecv, P2PKind::kSendActivation};
    case P2PKind::kSendGrad: return {PipelineStage::kGradOut, comm::P2POp::kSend, P2PKind::kSendGrad};
    case P2PKind::kRecvGrad: return {PipelineStage::kGradIn, comm::P2POp::kRecv, P2PKind::kSendGrad};
  }
  throw std::logic_error("PipelineStage: unknown transfer kind");
}

}  // namespace

void PipelineStage::exchange(const std::vector<PipeTransfer>& transfers) {
  if (transfers.empty()) return;
  std::vector<Transfer> ops;
  std::vector<std::pair<Tensor, int>> sent;
  std::vector<const float*> received;
  reclaim(false);
  for (const PipeTransfer& t : transfers) {
    const Route r = route_of(t.kind);
    const bool send = r.op == comm::P2POp::kSend;
    device::DeviceArray<float>& data = send ? held(r.buf, t.micro) : acquire(r.buf, t.micro);
    ops.push_back({send ? Transfer::kSend : Transfer::kRecv, Buf::f32(data.data(), data.size()), t.peer_stage,
                   p2p_tag(r.tag_kind, t.micro)});
    if (send) sent.emplace_back(r.buf, t.micro);
    else received.push_back(data.data());
  }
  Work work = groups_.pp().send_recv(ops);
  for (const float* p : received) {
    if (receiving_.count(p))
      throw std::logic_error("PipelineStage: a second receive into a buffer whose receive was not read");
    receiving_[p] = work;
  }
  const std::shared_future<void> done = work.inputs_free();
  for (const auto& [kind, micro] : sent) {
    if (!done.valid()) {  // later writes to the buffer queue behind the send
      release(kind, micro);
      continue;
    }
    auto it = live_.find({kind, micro});
    sending_.emplace_back(done, std::move(it->second));
    live_.erase(it);
  }
}

void PipelineStage::await(const float* data) {
  auto it = receiving_.find(data);
  if (it == receiving_.end()) return;
  Work work = it->second;
  receiving_.erase(it);
  work.land();  // waits (counted as communication) and rethrows the transfer's failure
}

void PipelineStage::reclaim(bool wait_oldest) {
  if (wait_oldest && !sending_.empty()) groups_.clock().time([&] { sending_.front().first.wait(); });
  while (!sending_.empty() &&
         sending_.front().first.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    free_.push_back(std::move(sending_.front().second));
    sending_.pop_front();
  }
}

// A (B,T,C) boundary tensor as the model exchanges it (bf16 runs: half of fp32).
size_t PipelineStage::buffer_bytes() const { return gpt_.boundary_floats(B_, T_) * sizeof(float); }

device::DeviceArray<float>& PipelineStage::acquire(Tensor kind, int micro) {
  auto [it, fresh] = live_.try_emplace({kind, micro});
  if (!fresh)
    throw std::logic_error(fmt::format("PipelineStage: stage {} buffer {} of micro-batch {} taken twice",
                                       stage_, static_cast<int>(kind), micro));
  if (free_.empty() && sending_.size() >= max_sending_) reclaim(true);
  if (!free_.empty()) {
    it->second = std::move(free_.back());
    free_.pop_back();
  } else {
    it->second = device::DeviceArray<float>(*gpt_.backend().memory, buffer_bytes() / sizeof(float));
  }
  return it->second;
}

device::DeviceArray<float>& PipelineStage::held(Tensor kind, int micro) {
  auto it = live_.find({kind, micro});
  if (it == live_.end())
    throw std::logic_error(fmt::format("PipelineStage: stage {} has no buffer {} for micro-batch {} (schedule "
                                       "order)", stage_, static_cast<int>(kind), micro));
  return it->second;
}

void PipelineStage::release(Tensor kind, int micro) {
  auto it = live_.find({kind, micro});
  free_.push_back(std::move(it->second));
  live_.erase(it);
}

}  // namespace holmes::parallel
