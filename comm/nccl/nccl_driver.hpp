// What the NCCL group calls: NCCL's entry points (nccl_api.hpp) and the few CUDA runtime
// calls it makes itself (completion events, one scratch float, the device its watchdog
// thread works on). The real driver loads
// libnccl; unit tests hand make_nccl_group a driver of fakes, so the group's logic
// (non-blocking init, polling, time-outs, abort, the watchdog) is tested without a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <string>

#include "comm/nccl/nccl_api.hpp"
#include "comm/process_group.hpp"
#include "comm/store.hpp"

namespace holmes::comm {

struct CudaCalls {
  decltype(&::cudaEventCreateWithFlags) event_create;
  decltype(&::cudaEventRecord) event_record;
  decltype(&::cudaEventQuery) event_query;
  decltype(&::cudaEventDestroy) event_destroy;
  cudaError_t (*device_malloc)(void**, size_t);  // cudaMalloc (overloaded in cuda_runtime.h)
  cudaError_t (*device_free)(void*);
  decltype(&::cudaGetErrorString) error_string;
  decltype(&::cudaGetDevice) get_device;
  decltype(&::cudaSetDevice) set_device;
  decltype(&::cudaStreamCreateWithFlags) stream_create;
  decltype(&::cudaStreamDestroy) stream_destroy;
};

struct NcclDriver {
  const NcclApi* nccl = nullptr;
  CudaCalls cuda{};
};

// libnccl (nccl(): throws NcclUnavailable when it cannot be loaded) and the CUDA runtime.
NcclDriver nccl_driver();

// The pause before poll `attempt` (0, 1, ...) of a non-blocking NCCL call still in progress:
// none for the first kSpinPolls (an enqueue is ready within microseconds, and sleeping 50 us
// per operation would leave the GPU waiting on the host for every tensor-parallel sum), then
// 10 us doubling to 10 ms.
inline constexpr int kSpinPolls = 64;
std::chrono::microseconds poll_pause(int attempt);

// make_nccl_group (nccl_group.hpp) over `driver`.
std::unique_ptr<ProcessGroup> make_nccl_group(const std::shared_ptr<Store>& store, GroupSpec spec,
                                              const std::string& net, const NcclDriver& driver);

}  // namespace holmes::comm
