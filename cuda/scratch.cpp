#include "cuda/scratch.hpp"

#include "cuda/check.hpp"

namespace holmes::cuda {

std::size_t ScratchLayout::add(std::size_t bytes) {
  const std::size_t offset = (end_ + kAlign - 1) / kAlign * kAlign;
  end_ = offset + bytes;
  return offset;
}

StreamScratch::StreamScratch(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
  if (bytes > 0) HOLMES_CUDA_CHECK(cudaMallocAsync(&data_, bytes, stream_));
}

StreamScratch::~StreamScratch() {
  if (data_ != nullptr) (void)cudaFreeAsync(data_, stream_);
}

void StreamScratch::release() {
  void* p = data_;
  data_ = nullptr;
  if (p != nullptr) HOLMES_CUDA_CHECK(cudaFreeAsync(p, stream_));
}

}  // namespace holmes::cuda
