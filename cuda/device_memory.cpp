#include "cuda/device_memory.hpp"

#include "cuda/check.hpp"

namespace holmes::cuda {

namespace {

class CudaMemory final : public model::DeviceMemory {
 public:
  explicit CudaMemory(cudaStream_t stream) : stream_(stream) {}
  const char* name() const override { return "cuda"; }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    HOLMES_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  void release(void* p) noexcept override {
    if (p != nullptr) cudaFree(p);  // no throw from destructors; a failure here is a dead context
  }
  void zero(void* p, size_t bytes) override { HOLMES_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_)); }
  void copy(void* dst, const void* src, size_t bytes) override {
    HOLMES_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    // From pageable memory the call returns once the host bytes are staged: the caller may
    // reuse its buffer at once.
    HOLMES_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void download(void* host, const void* src, size_t bytes) override {
    HOLMES_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
    HOLMES_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void synchronize() override { HOLMES_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void* stream() const override { return stream_; }
  double device_used_mb() const override {
    size_t free = 0, total = 0;
    HOLMES_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return static_cast<double>(total - free) / (1 << 20);
  }

 private:
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<model::DeviceMemory> make_device_memory(cudaStream_t stream) {
  return std::make_unique<CudaMemory>(stream);
}

}  // namespace holmes::cuda
