#include "cuda/cuda_memory.hpp"

#include <cstring>
#include <mutex>

#include "cuda/check.hpp"

namespace holmes::cuda {

namespace {

// Uploads of up to kStagedMax bytes (token batches, targets) go through two pinned host
// buffers used in turn: the caller's bytes are copied there, the copy to the device is
// queued on the stream without waiting for it, and an event says when the buffer may be
// reused (by then, two uploads later, it long has been). Larger uploads (weights at start-up)
// copy from the caller's memory directly.
constexpr size_t kStagedMax = size_t{64} << 20;

class EventFence final : public device::QueueFence {
 public:
  explicit EventFence(cudaStream_t stream, bool timed = false) {
    HOLMES_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timed ? cudaEventDefault : cudaEventDisableTiming));
    HOLMES_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~EventFence() override { (void)cudaEventDestroy(event_); }
  EventFence(const EventFence&) = delete;
  EventFence& operator=(const EventFence&) = delete;
  void wait() override { HOLMES_CUDA_CHECK(cudaEventSynchronize(event_)); }
  double ms_since(device::QueueFence& start) override {
    float ms = 0;
    HOLMES_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<EventFence&>(start).event_, event_));
    return ms;
  }
  void hold(void* queue) override {
    HOLMES_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(queue), event_, 0));
  }
  bool done() override {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    HOLMES_CUDA_CHECK(e);
    return true;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

struct Staging {
  void* host = nullptr;
  size_t bytes = 0;
  cudaEvent_t done = nullptr;
};

class CudaMemory final : public device::DeviceMemory {
 public:
  explicit CudaMemory(cudaStream_t stream) : stream_(stream) { HOLMES_CUDA_CHECK(cudaGetDevice(&device_)); }
  ~CudaMemory() override {
    if (side_) cudaStreamSynchronize(side_), cudaStreamDestroy(side_);
    if (order_event_) cudaEventDestroy(order_event_);
    for (Staging& s : staging_) {
      if (s.done) cudaEventSynchronize(s.done), cudaEventDestroy(s.done);
      if (s.host) cudaFreeHost(s.host);
    }
  }
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
    // Either way the caller may reuse its buffer at once.
    if (bytes == 0) return;
    if (bytes > kStagedMax) {
      HOLMES_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
      return;
    }
    // Another thread (a communication thread) may upload at the same time: the buffers are
    // taken in turn under a lock, held until this copy is queued.
    std::lock_guard<std::mutex> lock(staging_mutex_);
    Staging& s = staging_[next_];
    next_ ^= 1;
    if (s.done) HOLMES_CUDA_CHECK(cudaEventSynchronize(s.done));  // its previous copy has left
    if (s.bytes < bytes) {
      if (s.host) HOLMES_CUDA_CHECK(cudaFreeHost(s.host));
      s.host = nullptr;
      s.bytes = 0;
      HOLMES_CUDA_CHECK(cudaMallocHost(&s.host, bytes));
      s.bytes = bytes;
    }
    if (!s.done) HOLMES_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    std::memcpy(s.host, host, bytes);
    HOLMES_CUDA_CHECK(cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, stream_));
    HOLMES_CUDA_CHECK(cudaEventRecord(s.done, stream_));
  }
  void download(void* host, const void* src, size_t bytes) override {
    HOLMES_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
    HOLMES_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void synchronize() override { HOLMES_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void* stream() const override { return stream_; }
  void* side_stream() override {
    // Non-blocking: no implicit ordering with the legacy default stream; order() orders.
    if (!side_) HOLMES_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    return side_;
  }
  void order(void* from, void* to) override {
    if (from == to) return;
    if (!order_event_) HOLMES_CUDA_CHECK(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming));
    // cudaStreamWaitEvent waits for the record made just before it, so one event serves every call.
    HOLMES_CUDA_CHECK(cudaEventRecord(order_event_, static_cast<cudaStream_t>(from)));
    HOLMES_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(to), order_event_, 0));
  }
  void copy_on(void* queue, void* dst, const void* src, size_t bytes) override {
    HOLMES_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(queue)));
  }
  void zero_on(void* queue, void* p, size_t bytes) override {
    HOLMES_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(queue)));
  }
  void* allocate_pinned(size_t bytes) override {
    void* p = nullptr;
    HOLMES_CUDA_CHECK(cudaMallocHost(&p, bytes > 0 ? bytes : 1));
    return p;
  }
  void release_pinned(void* p) noexcept override {
    if (p != nullptr) cudaFreeHost(p);
  }
  void download_queued(void* pinned, const void* src, size_t bytes) override {
    if (bytes > 0) HOLMES_CUDA_CHECK(cudaMemcpyAsync(pinned, src, bytes, cudaMemcpyDeviceToHost, stream_));
  }
  void upload_queued(void* dst, const void* pinned, size_t bytes) override {
    if (bytes > 0) HOLMES_CUDA_CHECK(cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, stream_));
  }
  std::shared_ptr<device::QueueFence> fence_on(void* queue) override {
    return std::make_shared<EventFence>(static_cast<cudaStream_t>(queue));
  }
  std::shared_ptr<device::QueueFence> timed_fence_on(void* queue) override {
    return std::make_shared<EventFence>(static_cast<cudaStream_t>(queue), true);
  }
  void bind_thread() override { HOLMES_CUDA_CHECK(cudaSetDevice(device_)); }
  bool holds(const void* p) const override {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      (void)cudaGetLastError();  // not a pointer the runtime knows: host memory
      return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  }
  double device_used_mb() const override {
    size_t free = 0, total = 0;
    HOLMES_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return static_cast<double>(total - free) / (1 << 20);
  }

 private:
  cudaStream_t stream_;
  int device_ = 0;
  cudaStream_t side_ = nullptr;
  cudaEvent_t order_event_ = nullptr;
  std::mutex staging_mutex_;
  Staging staging_[2];
  int next_ = 0;
};

}  // namespace

std::unique_ptr<device::DeviceMemory> make_device_memory(cudaStream_t stream) {
  return std::make_unique<CudaMemory>(stream);
}

}  // namespace holmes::cuda
