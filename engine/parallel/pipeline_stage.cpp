#include "engine/parallel/pipeline_stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace holmes::parallel {

PipelineStage::PipelineStage(std::vector<model::Gpt*> chunks, ParallelGroups& groups, const schedule::RankPlan& plan)
    : chunks_(std::move(chunks)), gpt_(*chunks_.at(0)), groups_(groups), stage_(plan.place[schedule::Axis::kPp]),
      pp_size_(plan.place.degree(schedule::Axis::kPp)), micro_batches_(plan.micro_batches), B_(plan.micro_batch),
      T_(plan.seq_len), steps_(plan.steps) {
  const int pp = pp_size_, v = static_cast<int>(chunks_.size());
  const schedule::PipeSchedule schedule = plan.schedule;
  if (v != static_cast<int>(plan.chunks.size()) || (schedule == schedule::PipeSchedule::kInterleaved) != (v > 1))
    throw std::logic_error(fmt::format("PipelineStage: {} model chunks under schedule {} with {} planned", v,
                                       schedule::pipe_schedule_name(schedule), plan.chunks.size()));
  if (groups.place().at != plan.place.at)
    throw std::logic_error(fmt::format("PipelineStage: the groups and the plan of rank {} disagree on its place",
                                       plan.rank));
  split_ = plan.split_backward();
  slot_micro_.resize(v);
  for (int c = 0; c < v; ++c) {
    const model::Gpt& gpt = *chunks_[c];
    const int slots = schedule::max_in_flight(steps_, c);
    if (gpt.slots() != slots)
      throw std::logic_error(fmt::format("PipelineStage: chunk {} of the model has {} activation slots, stage {} of "
                                         "{} keeps {} micro-batches of it in flight under {}", c, gpt.slots(),
                                         stage_, pp, slots, schedule::pipe_schedule_name(schedule)));
    if (gpt.policy().split_backward != split_)
      throw std::logic_error(fmt::format("PipelineStage: schedule {} {} a split backward, the model {}",
                                         schedule::pipe_schedule_name(schedule), split_ ? "needs" : "does not run",
                                         gpt.policy().split_backward ? "splits" : "does not"));
    slot_micro_[c].assign(slots, -1);
  }
  max_sending_ = static_cast<size_t>(std::max(schedule::max_in_flight(steps_), 2));
  inputs_.resize(static_cast<size_t>(B_) * T_);
  targets_.resize(inputs_.size());
  if (chunks_.front()->policy().document_mask) positions_.resize(inputs_.size());
}

void PipelineStage::reset() {
  // A step that failed half-way (a CommError) may have left transfers queued and buffers and
  // slots taken.
  for (Group* g : groups_.pp_groups()) g->abandon();
  receiving_.clear();
  for (auto& [key, buf] : live_) free_.push_back(std::move(buf));
  live_.clear();
  for (auto& [done, buf] : sending_) free_.push_back(std::move(buf));
  sending_.clear();
  for (auto& slots : slot_micro_) std::fill(slots.begin(), slots.end(), -1);
  if (holds_last()) chunks_.back()->take_loss_sum();  // drops what a failed step left
  loss_sum_ = 0;
  compute_s_ = 0;
  pass_s_ = 0;
  receive_wait_s_ = 0;
}

namespace {

// Adds the seconds `op` took to `seconds`, less what it spent blocked in communication on
// `clock` (tensor-parallel sums, parameter all-gathers landing inside a forward): compute
// alone, which is what a calibration divides the FLOPs by; `wall` gets the whole time.
template <class F>
void timed(double& seconds, double& wall, const CommClock& clock, F&& op) {
  const auto t0 = std::chrono::steady_clock::now();
  const double comm0 = clock.ms();
  op();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  seconds += std::max(0.0, s - (clock.ms() - comm0) / 1e3);
  wall += s;
}

}  // namespace

double PipelineStage::run_step(const FetchFn& fetch, const std::function<void(int chunk, int micro)>& before_grads) {
  reset();
  for (size_t i = 0; i < steps_.size(); ++i) {
    const schedule::PipeStep& s = steps_[i];
    if (s.kind == schedule::PipeOpKind::kComm) {
      exchange(s.transfers);
      continue;
    }
    if (!s.transfers.empty())
      throw std::logic_error("PipelineStage: transfers belong to kComm steps of the schedule");
    switch (s.kind) {
      case schedule::PipeOpKind::kForward: forward(s.chunk, s.micro, fetch); break;
      case schedule::PipeOpKind::kBackward: {
        // A W right behind its own B runs with it, as one pass (joins_weights).
        const bool whole = !split_ || schedule::joins_weights(steps_, i, micro_batches_);
        if (whole) before_grads(s.chunk, s.micro);
        backward(s.chunk, s.micro, whole ? model::Pass::kAll : model::Pass::kInput);
        if (split_ && whole) ++i;
        break;
      }
      case schedule::PipeOpKind::kWeights:
        before_grads(s.chunk, s.micro);
        weights(s.chunk, s.micro);
        break;
      case schedule::PipeOpKind::kComm: break;
    }
  }
  finish_transfers();
  // On a GPU the last backward's kernels are still queued: wait for them inside the compute
  // time, so it measures the device's work (a no-op on the CPU).
  timed(compute_s_, pass_s_, groups_.clock(), [&] { gpt_.backend().memory->synchronize(); });
  // Communication the device ran on the compute stream (NCCL groups) is in the passes' time:
  // it was not compute.
  compute_s_ = std::max(0.0, compute_s_ - groups_.clock().settle() / 1e3);
  // The micro-batches' losses, read once per step (the device is idle by now).
  if (holds_last()) loss_sum_ = chunks_.back()->take_loss_sum();
  return loss_sum_;
}

double PipelineStage::run_forward(int count, const FetchFn& fetch) {
  // Plain in-order hand-off along the virtual pipeline: for each micro-batch and chunk, recv,
  // forward, send. A stage blocks only on the virtual stage before or after, each wait is on
  // an earlier (micro-batch, virtual stage) in the order every stage follows, so rendezvous
  // sends cannot deadlock (the wrap-around from the last stage to stage 0 included).
  reset();
  const int v = static_cast<int>(chunks_.size());
  for (int e = 0; e < count; ++e)
    for (int c = 0; c < v; ++c) {
      if (!first(c)) exchange({{schedule::P2PKind::kRecvActivation, e, (stage_ + pp_size_ - 1) % pp_size_, c}});
      forward(c, e, fetch);
      if (!last(c)) exchange({{schedule::P2PKind::kSendActivation, e, (stage_ + 1) % pp_size_, c}});
      slot_micro_[c][e % slot_micro_[c].size()] = -1;  // no backward follows
    }
  finish_transfers();
  if (holds_last()) loss_sum_ = chunks_.back()->take_loss_sum();
  compute_s_ = std::max(0.0, compute_s_ - groups_.clock().settle() / 1e3);
  return loss_sum_;
}

void PipelineStage::finish_transfers() {
  for (Group* g : groups_.pp_groups()) g->drain();
  if (!receiving_.empty())  // a schedule that never reads a received tensor is a bug
    throw std::logic_error(fmt::format("PipelineStage: stage {} ended the step with {} receives never read", stage_,
                                       receiving_.size()));
  reclaim(false);
  if (!sending_.empty() || !live_.empty())  // a schedule that leaves a transfer unmatched is a bug, not a hang
    throw std::logic_error(fmt::format("PipelineStage: stage {} ended the step with {} unsent or unused buffers",
                                       stage_, live_.size() + sending_.size()));
}

void PipelineStage::use_slot(int chunk, int micro, SlotUse use) {
  std::vector<int>& slots = slot_micro_.at(chunk);
  const int slot = micro % static_cast<int>(slots.size());
  const int want = use == SlotUse::kTake ? -1 : micro;
  if (slots[slot] != want)
    throw std::logic_error(fmt::format("PipelineStage: stage {} {} micro-batch {} in slot {} of chunk {} held by {}",
                                       stage_, use == SlotUse::kTake ? "forward of" : "backward of", micro, slot,
                                       chunk, slots[slot]));
  slots[slot] = use == SlotUse::kTake ? micro : use == SlotUse::kSelect ? micro : -1;
  chunks_[chunk]->set_slot(slot);
}

void PipelineStage::forward(int chunk, int micro, const FetchFn& fetch) {
  model::Gpt& gpt = *chunks_.at(chunk);
  const bool first_v = first(chunk), last_v = last(chunk);
  // Document masking: every stage's attention and positions need the micro-batch's documents.
  int32_t* positions = positions_.empty() ? nullptr : positions_.data();
  if (first_v || last_v || positions) fetch(micro, inputs_.data(), targets_.data(), positions);
  use_slot(chunk, micro, SlotUse::kTake);
  const float* input = first_v ? nullptr : held({kActIn, chunk, micro}).data();
  if (input != nullptr) await(input);
  timed(compute_s_, pass_s_, groups_.clock(), [&] {
    gpt.forward_stage(first_v ? inputs_.data() : nullptr, input, last_v ? targets_.data() : nullptr, B_, T_, positions);
    if (test_delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(test_delay_ms_));
  });
  if (!first_v) release({kActIn, chunk, micro});  // the model copied it into the slot
  if (!last_v) gpt.backend().memory->copy(acquire({kActOut, chunk, micro}).data(), gpt.output(), buffer_bytes());
}

void PipelineStage::backward(int chunk, int micro, model::Pass pass) {
  model::Gpt& gpt = *chunks_.at(chunk);
  // B alone keeps the slot (its W reads it later).
  use_slot(chunk, micro, pass == model::Pass::kInput ? SlotUse::kSelect : SlotUse::kFree);
  if (last(chunk)) {
    timed(compute_s_, pass_s_, groups_.clock(), [&] { gpt.backward(loss_scale_ / static_cast<float>(micro_batches_), pass); });  // mean over micro-batches
  } else {
    const float* grad = held({kGradIn, chunk, micro}).data();
    await(grad);
    timed(compute_s_, pass_s_, groups_.clock(), [&] { gpt.backward_stage(grad, pass); });
    release({kGradIn, chunk, micro});
  }
  if (!first(chunk))
    gpt.backend().memory->copy(acquire({kGradOut, chunk, micro}).data(), gpt.input_grad(), buffer_bytes());
}

void PipelineStage::weights(int chunk, int micro) {
  use_slot(chunk, micro, SlotUse::kFree);
  timed(compute_s_, pass_s_, groups_.clock(), [&] { chunks_.at(chunk)->backward_weights(); });
}

namespace {

// Which buffer a transfer moves and in which direction. Both ends tag a transfer by its
// direction, micro-batch and boundary (p2p_tag of the send kind), so tags match whatever
// p2p_tag gives recvs.
struct Route {
  PipelineStage::Tensor buf;
  comm::P2POp::Kind op;
  schedule::P2PKind tag_kind;
};

Route route_of(schedule::P2PKind kind) {
  switch (kind) {
    case schedule::P2PKind::kSendActivation: return {PipelineStage::kActOut, comm::P2POp::kSend, schedule::P2PKind::kSendActivation};
    case schedule::P2PKind::kRecvActivation: return {PipelineStage::kActIn, comm::P2POp::kRecv, schedule::P2PKind::kSendActivation};
    case schedule::P2PKind::kSendGrad: return {PipelineStage::kGradOut, comm::P2POp::kSend, schedule::P2PKind::kSendGrad};
    case schedule::P2PKind::kRecvGrad: return {PipelineStage::kGradIn, comm::P2POp::kRecv, schedule::P2PKind::kSendGrad};
  }
  throw std::logic_error("PipelineStage: unknown transfer kind");
}

}  // namespace

void PipelineStage::exchange(const std::vector<schedule::PipeTransfer>& transfers) {
  if (transfers.empty()) return;
  // One batch per group the transfers take (pp, or a pp-hop group to a neighbour: pp_route),
  // in the order of their first transfer. Each hop group has two members that post their
  // transfers to each other in schedule order, on a communication thread of its own, so the
  // pipeline group's batches keep the schedule's order among themselves and no batch waits
  // for another group's.
  struct Batch {
    Group* group;
    std::vector<Transfer> ops;
    std::vector<Key> sent;
    std::vector<const float*> received;
  };
  std::vector<Batch> batches;
  reclaim(false);
  for (const schedule::PipeTransfer& t : transfers) {
    const Route r = route_of(t.kind);
    const bool send = r.op == comm::P2POp::kSend;
    const Key key{r.buf, t.chunk, t.micro};
    device::DeviceArray<float>& data = send ? held(key) : acquire(key);
    const auto [group, peer] = groups_.pp_route(t.peer_stage);
    auto b = std::find_if(batches.begin(), batches.end(), [g = group](const Batch& x) { return x.group == g; });
    if (b == batches.end()) b = batches.insert(batches.end(), Batch{group, {}, {}, {}});
    // This tp rank's slice of the tensor (the whole of it without tensor parallelism).
    const size_t slice = slice_floats();
    float* at = data.data() + static_cast<size_t>(groups_.group(schedule::Axis::kTp).rank()) * slice;
    b->ops.push_back({send ? Transfer::kSend : Transfer::kRecv, Buf::f32(at, slice), peer,
                      schedule::p2p_tag(r.tag_kind, t.micro, schedule::link_chunk(stage_, t))});
    if (send) b->sent.push_back(key);
    else b->received.push_back(data.data());
  }
  for (Batch& b : batches) {
    Work work = b.group->send_recv(b.ops);
    for (const float* p : b.received) {
      if (receiving_.count(p))
        throw std::logic_error("PipelineStage: a second receive into a buffer whose receive was not read");
      receiving_[p] = {work, groups_.group(schedule::Axis::kTp).size() > 1};
    }
    const std::shared_future<void> done = work.inputs_free();
    for (const Key& key : b.sent) {
      if (!done.valid()) {  // later writes to the buffer queue behind the send
        release(key);
        continue;
      }
      auto it = live_.find(key);
      sending_.emplace_back(done, std::move(it->second));
      live_.erase(it);
    }
  }
}

void PipelineStage::await(const float* data) {
  auto it = receiving_.find(data);
  if (it == receiving_.end()) return;
  Receiving r = it->second;
  receiving_.erase(it);
  const bool waits = !r.work.ready();
  const auto t0 = std::chrono::steady_clock::now();
  r.work.land();  // waits (counted as communication) and rethrows the transfer's failure
  if (waits) receive_wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.gather) return;
  // Every tp rank received its own slice in place: the others' come over the tp group (inside
  // the node). The input is a copy (the output buffer holds it at this rank's offset), and
  // every tp rank of the stage gathers its tensors in the same (schedule) order.
  Group& tp = groups_.group(schedule::Axis::kTp);
  const size_t slice = slice_floats();
  float* full = const_cast<float*>(data);
  if (gather_in_.size() != slice) gather_in_ = device::DeviceArray<float>(*gpt_.backend().memory, slice);
  gpt_.backend().memory->copy(gather_in_.data(), full + static_cast<size_t>(tp.rank()) * slice, slice * sizeof(float));
  tp.all_gather(Buf::f32(full, pool_floats()), Buf::f32(gather_in_.data(), slice)).land();
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

size_t PipelineStage::slice_floats() const {
  const size_t t = static_cast<size_t>(groups_.group(schedule::Axis::kTp).size());
  return (gpt_.boundary_floats(B_, T_) + t - 1) / t;
}

device::DeviceArray<float>& PipelineStage::acquire(Key key) {
  auto [it, fresh] = live_.try_emplace(key);
  if (!fresh)
    throw std::logic_error(fmt::format("PipelineStage: stage {} buffer {} of chunk {} micro-batch {} taken twice",
                                       stage_, std::get<0>(key), std::get<1>(key), std::get<2>(key)));
  if (free_.empty() && sending_.size() >= max_sending_) reclaim(true);
  if (!free_.empty()) {
    it->second = std::move(free_.back());
    free_.pop_back();
  } else {
    it->second = device::DeviceArray<float>(*gpt_.backend().memory, pool_floats());
    if (pool_floats() * sizeof(float) > buffer_bytes()) it->second.zero();  // the last slice's padding
  }
  return it->second;
}

device::DeviceArray<float>& PipelineStage::held(Key key) {
  auto it = live_.find(key);
  if (it == live_.end())
    throw std::logic_error(fmt::format("PipelineStage: stage {} has no buffer {} for chunk {} micro-batch {} "
                                       "(schedule order)", stage_, std::get<0>(key), std::get<1>(key),
                                       std::get<2>(key)));
  return it->second;
}

void PipelineStage::release(Key key) {
  auto it = live_.find(key);
  free_.push_back(std::move(it->second));
  live_.erase(it);
}

}  // namespace holmes::parallel
