// The CUDA backend as a model::Backend: device memory and the fp32 kernels on one stream of
// GPU 0, which the backend owns. The registry (model/registry/) is the only caller.
#pragma once

#include "model/backend.hpp"

namespace holmes::cuda {

// Throws CudaError when there is no usable GPU (ask query_gpus first for a clear message).
model::Backend make_cuda_backend(int device = 0);

}  // namespace holmes::cuda
