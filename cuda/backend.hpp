// The CUDA backend as a model::Backend: device memory and the kernels (fp32 and bf16) on one
// stream of the GPU `device`, which the backend owns. backends/ (the composition root) is the
// only caller.
#pragma once

#include "model/backend.hpp"

namespace holmes::cuda {

// Throws CudaError when there is no usable GPU (ask query_gpus first for a clear message).
model::Backend make_cuda_backend(int device = 0);

}  // namespace holmes::cuda
