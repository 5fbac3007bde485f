// The CUDA backend's memory (device/device_memory.hpp): cudaMalloc'd device memory, copies
// and fills queued on one stream; download() waits for the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "device/device_memory.hpp"

namespace holmes::cuda {

std::unique_ptr<device::DeviceMemory> make_device_memory(cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
