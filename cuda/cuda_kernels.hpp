// The CUDA implementation of model/kernels.hpp (fp32): every pointer it is given must be
// device memory (cuda/cuda_memory.hpp is the matching DeviceMemory). The registry does not
// hand it out for training yet (issue 13); the parity tests run it against the CPU kernels
// op by op.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "model/kernels.hpp"

namespace holmes::cuda {

// Ops are enqueued on `stream` (the legacy default stream when null) and return before the
// GPU finishes; synchronize the stream before reading results on the host. The GEMMs use
// one GemmRunner owned by the returned object: use one object per stream.
std::unique_ptr<model::Kernels> make_cuda_kernels(cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
