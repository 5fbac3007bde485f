// The composition root above the backends: which compute backends this build has (the CPU
// always, CUDA when built with the toolkit), the one way to make one, and the NCCL groups.
// Everything above model/ asks here instead of using #ifdef HOLMES_WITH_CUDA or a factory.
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.hpp"
#include "comm/store.hpp"
#include "model/backend.hpp"

namespace holmes::backends {

bool cuda_built();

// This machine's GPUs as the CUDA runtime sees them; count 0 when there are none, and `why`
// (may be null) then says why: built without CUDA, no driver, no device.
struct GpuSummary {
  int count = 0;
  std::string name;        // of GPU 0
  double memory_gb = 0;    // of GPU 0
};
GpuSummary local_gpus(std::string* why = nullptr);

// Throws UserError naming job.device when this build cannot train on `device` (cpu, cuda,
// auto), with what is accepted. The one check of job.device, before any work.
void require_training_device(const std::string& device);

// job.device as this machine trains it: auto is cuda when this build has CUDA and the node a
// GPU, else cpu; cpu and cuda stay as they are. When auto falls back to the CPU, `note` (may
// be null) says why, for the one line the process prints.
std::string resolve_device(const std::string& device, std::string* note = nullptr);

// The backend that trains on `device` (job.device: cpu, cuda or auto, resolved by
// resolve_device). cuda: this node's GPU local_rank % (GPUs), so the workers of a node spread
// over its GPUs (and share them when there are more workers than GPUs). Calls
// require_training_device first.
model::Backend make_backend(const std::string& device, int local_rank = 0);

// NCCL process groups (comm/nccl/), built with the CUDA backend. nccl_usable: libnccl loads
// (2.19 or newer) and this build has the group; else false and `why` says which is missing.
bool nccl_usable(std::string* why = nullptr);
// comm::make_nccl_group (comm/nccl/nccl_group.hpp) on the current GPU; std::logic_error in a
// build without CUDA (callers ask nccl_usable first).
std::unique_ptr<comm::ProcessGroup> make_nccl_group(const std::shared_ptr<comm::Store>& store,
                                                    const comm::GroupSpec& spec, const std::string& net);

}  // namespace holmes::backends
