// The pipeline group's transfers of one stage, asynchronous to the compute: a send does not
// hold up the forward or backward that follows it, a receive is waited for only when its
// tensor is about to be read. Each schedule comm step is posted as one send_recv, in
// schedule order, so the deadlock argument of schedule.hpp holds unchanged (the posts run
// in the order the synchronous stage made them; only the compute no longer waits for sends).
//
// Three ways, chosen from the group and the memory:
// - NCCL (ParallelContext::pp_device): send_recv is enqueued on the compute stream, which
//   orders everything; post() returns once it is enqueued.
// - host memory (the CPU backend): a communication thread runs each step's send_recv on the
//   stage's own buffers. A sent buffer may be written again once the future post() returned
//   is ready; a buffer received into is read only after await().
// - device memory over a host group (Gloo across islands, ranks sharing a GPU): a send's
//   bytes are copied into pinned host memory by a copy queued on the compute stream, and the
//   communication thread sends once a fence says the copy landed (the device buffer is free
//   at once: later writes to it are queued after the copy). A receive lands in pinned
//   memory; await() waits for it and queues the copy to the device before the kernels that
//   read it. Pinned buffers are reused once their send ended or their upload passed a fence.
// On the communication thread a received tensor is handed on as soon as it landed
// (OpOptions::on_received), while a send of the same step may still be on the wire.
//
// Main thread only (post, await, drain, abandon); the communication thread owns the group
// while work is queued (comm/process_group.hpp).
#pragma once

#include <future>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "comm/comm_thread.hpp"
#include "comm/process_group.hpp"
#include "engine/parallel/dist_comm.hpp"
#include "device/device_memory.hpp"

namespace holmes::parallel {

class PipeChannel {
 public:
  enum class Mode { kDeviceGroup, kHost, kStaged };

  // pp and mem outlive the channel. device_group: pp runs device buffers itself (an NCCL
  // group, or a StagedGroup over one). max_pinned: pinned buffers kept before a post waits
  // for one to come free (staged only).
  PipeChannel(comm::ProcessGroup& pp, bool device_group, device::DeviceMemory& mem, CommClock& clock,
              int max_pinned);
  ~PipeChannel();
  PipeChannel(const PipeChannel&) = delete;
  PipeChannel& operator=(const PipeChannel&) = delete;

  Mode mode() const { return mode_; }

  // Posts the ops of one comm step together. Sends read their buffers as the work queued
  // before this call leaves them. Returns when the send buffers may be written again: an
  // empty future means at once, else when the future is ready. Errors of the transfer come
  // from await() or drain().
  std::shared_future<void> post(std::span<const comm::P2POp> ops);
  // Before anything reads `data`, a buffer a post received into: waits for the receive (the
  // wait counts as communication time) and, staged, queues its copy to the device. Rethrows
  // the transfer's failure. No-op for a buffer with no receive pending.
  void await(const float* data);
  // Waits for everything posted; rethrows the first failure. Every receive must have been
  // awaited (a logic error otherwise).
  void drain();
  // After a failed step: drops the transfers not started, waits for the one running, and
  // forgets the pending receives.
  void abandon() noexcept;

  // Pinned buffers allocated so far (tests).
  size_t pinned_buffers() const { return pinned_.size(); }

 private:
  struct Pinned {
    float* host = nullptr;
    size_t floats = 0;
    std::shared_future<void> transfer;           // the send_recv that uses it
    std::shared_ptr<device::QueueFence> upload;   // its copy to the device (a receive)
    bool awaiting = false;                       // received, not yet awaited
  };
  struct Pending {
    std::shared_future<void> done;
    int pinned = -1;  // staged: the pinned buffer it lands in
    size_t floats = 0;
  };

  comm::CommThread& thread();
  bool free_now(const Pinned& p) const;
  int take_pinned(size_t floats);  // a buffer of at least `floats`, free for a new transfer

  comm::ProcessGroup& pp_;
  device::DeviceMemory& mem_;
  CommClock& clock_;
  Mode mode_;
  int max_pinned_;
  std::vector<Pinned> pinned_;
  std::map<const float*, Pending> pending_;
  std::unique_ptr<comm::CommThread> thread_;  // last: stops before the buffers it uses go
};

const char* to_string(PipeChannel::Mode mode);

}  // namespace holmes::parallel
