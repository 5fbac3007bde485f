#include "cuda/scratch.hpp"

#include "cuda/check.hpp"

namespace holmes::cuda {

std::size_t ScratchLayout::add(std::size_t bytes) {
  const std::size_t offset = (end_ + kAlign - 1) / kAlign * kAlign;
  end_ = offset + bytes;
  return offset;
}

StreamScratch::StreamScratch(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
  if (bytes == 0) return;
  const cudaError_t err = cudaMallocAsync(&data_, bytes, stream_);
  if (err != cudaErrorNotSupported) {
    HOLMES_CUDA_CHECK(err);
    return;
  }
  // A device or driver without stream-ordered pools: plain cudaMalloc, freed after the
  // stream drains (release).
  (void)cudaGetLastError();
  pooled_ = false;
  HOLMES_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

StreamScratch::~StreamScratch() {
  if (data_ == nullptr) return;
  if (pooled_) {
    (void)cudaFreeAsync(data_, stream_);
  } else {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaFree(data_);
  }
}

void StreamScratch::release() {
  void* p = data_;
  data_ = nullptr;
  if (p == nullptr) return;
  if (pooled_) {
    HOLMES_CUDA_CHECK(cudaFreeAsync(p, stream_));
  } else {
    HOLMES_CUDA_CHECK(cudaStreamSynchronize(stream_));
    HOLMES_CUDA_CHECK(cudaFree(p));
  }
}

}  // namespace holmes::cuda
