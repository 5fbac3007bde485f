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
  int nvlinks = -1;        // GPU 0's active NVLinks as the driver says (-1: not known)
  int cc_major = 0, cc_minor = 0;  // compute capability of GPU 0
};
GpuSummary local_gpus(std::string* why = nullptr);

// What a calibration records of this machine's GPU stack ("" where unknown; all "" in a build
// without CUDA or on a machine without a GPU): the NVIDIA driver's release (from
// /proc/driver/nvidia/version, else its CUDA API version), the CUDA runtime, cuBLASLt, cuDNN
// and NCCL versions as their libraries report them.
struct GpuVersions {
  std::string driver, cuda, cublaslt, cudnn, nccl;
};
GpuVersions gpu_versions();

// The compute backends a build may have.
enum class Device { kCpu, kCuda };
const char* to_string(Device d);  // "cpu", "cuda"

// Why this build and machine cannot train on `d` ("" when they can): built without the CUDA
// toolkit, or no usable GPU (the reason local_gpus gives). The CPU is always usable.
std::string unusable(Device d);

// The backend that trains on `d`. cuda: this node's GPU local_rank % (GPUs), so the workers of
// a node spread over its GPUs (and share them when there are more workers than GPUs).
// std::invalid_argument when `d` is unusable (callers ask unusable() first and say so in the
// user's terms: engine/runtime names job.device).
model::Backend make_backend(Device d, int local_rank = 0);

// NCCL process groups (comm/nccl/), built with the CUDA backend. nccl_usable: libnccl loads
// (2.19 or newer) and this build has the group; else false and `why` says which is missing.
bool nccl_usable(std::string* why = nullptr);
// comm::make_nccl_group (comm/nccl/nccl_group.hpp) on the current GPU; std::logic_error in a
// build without CUDA (callers ask nccl_usable first).
std::unique_ptr<comm::ProcessGroup> make_nccl_group(const std::shared_ptr<comm::Store>& store,
                                                    const comm::GroupSpec& spec, const std::string& net);

}  // namespace holmes::backends
