#include "cuda/backend.hpp"

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/cuda_memory.hpp"

namespace holmes::cuda {

model::Backend make_cuda_backend(int device) {
  HOLMES_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  HOLMES_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  model::Backend b;
  // Destroyed last (Backend declares it first): kernels and memory still use the stream.
  b.resources = std::shared_ptr<void>(stream, [](void* s) { cudaStreamDestroy(static_cast<cudaStream_t>(s)); });
  b.device = "cuda";
  b.memory = make_device_memory(stream);
  b.kernels = make_cuda_kernels(stream);
  return b;
}

}  // namespace holmes::cuda
