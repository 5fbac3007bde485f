// A ProcessGroup over host memory (Gloo) used for buffers in device memory: each operation
// copies the device buffers it is given to host memory, runs the inner group's operation
// there, and copies the results back (what the Holmes paper's cross-cluster pipeline does
// over plain Ethernet, and what a job does whose ranks share a GPU, where NCCL refuses to
// run). Host buffers (the trainer's sums of a few doubles) pass straight through: the
// backend's DeviceMemory::holds() tells the two apart.
//
// Copies are ordered on the backend's queue: a download waits for the kernels queued before
// it, an upload is queued before the kernels that follow. One thread at a time (as for any
// ProcessGroup); the buffers are reused between operations.
//
// With a device group (an NCCL group of the same members, docs/comm.md), an operation whose
// buffers are all device memory goes to it instead, enqueued on `stream` (the backend's
// queue) unless the caller names another: nothing is staged, and the call returns once the
// operation is enqueued. Host buffers still go to the inner group.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "device/device_memory.hpp"

namespace holmes::parallel {

class StagedGroup final : public comm::ProcessGroup {
 public:
  // inner, memory and device (when given) must outlive this group; device has the same
  // members in the same order as inner.
  StagedGroup(comm::ProcessGroup& inner, device::DeviceMemory& memory, comm::ProcessGroup* device = nullptr,
              void* stream = nullptr);

  std::string transport() const override;
  void all_reduce(std::span<float> data, comm::ReduceOp op, const comm::OpOptions& o = {}) override;
  void reduce_scatter(std::span<float> out, std::span<const float> in, comm::ReduceOp op,
                      const comm::OpOptions& o = {}) override;
  void all_gather(std::span<float> out, std::span<const float> in, const comm::OpOptions& o = {}) override;
  void broadcast(std::span<float> data, int root, const comm::OpOptions& o = {}) override;
  void send_recv(std::span<const comm::P2POp> ops, const comm::OpOptions& o = {}) override;
  void barrier(const comm::OpOptions& o = {}) override;

  // Operations that staged at least one buffer, and operations the device group ran (tests).
  long staged_ops() const { return staged_ops_; }
  long device_ops() const { return device_ops_; }

 private:
  bool held(const void* p) const { return p != nullptr && mem_.holds(p); }
  // The device group when every buffer is device memory (empty spans do not count), else null;
  // `o` with the backend's stream filled in when the caller gave none.
  comm::ProcessGroup* on_device(std::initializer_list<const void*> buffers);
  comm::ProcessGroup* on_device(std::span<const void* const> buffers);
  comm::OpOptions with_stream(const comm::OpOptions& o) const;
  // The host copy of `data` in buffer `slot` (filled from the device when `read`), or data
  // itself when it is host memory.
  std::span<float> host_view(std::span<float> data, size_t slot, bool read);
  // Copies slot's host buffer back into data when data is device memory.
  void write_back(std::span<float> data, size_t slot);

  comm::ProcessGroup& inner_;
  device::DeviceMemory& mem_;
  comm::ProcessGroup* device_;
  void* stream_;
  long device_ops_ = 0;
  std::vector<std::vector<float>> bufs_;
  long staged_ops_ = 0;
  bool staged_now_ = false;
};

}  // namespace holmes::parallel
