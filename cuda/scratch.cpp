#include "cuda/scratch.hpp"

#include <cstdint>
#include <mutex>

#include "cuda/check.hpp"

namespace holmes::cuda {

std::size_t ScratchLayout::add(std::size_t bytes) {
  const std::size_t offset = (end_ + kAlign - 1) / kAlign * kAlign;
  end_ = offset + bytes;
  return offset;
}

namespace {

// The device's default pool keeps what is freed into it (release threshold: no limit), so
// the scratch of every step reuses memory instead of returning it to the driver at each
// synchronization (the pool's default threshold is 0). Once per device; a device without
// pools is left alone (cudaMallocAsync then reports it below).
void keep_pool_memory() {
  static std::once_flag once[64];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return;
  std::call_once(once[device], [device] {
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    std::uint64_t keep = UINT64_MAX;
    HOLMES_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  });
}

}  // namespace

StreamScratch::StreamScratch(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
  if (bytes == 0) return;
  keep_pool_memory();
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
