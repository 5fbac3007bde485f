// The memory half of a compute backend (the other half is Kernels, model/kernels.hpp).
// model::Gpt and the trainer allocate parameters, gradients, optimizer state and activations
// here and move bytes only through these calls, so the same code runs on host memory (CPU
// backend, model/cpu/host_memory.cpp) and device memory (CUDA backend). Copies and fills are
// ordered on the backend's queue (`stream()`); download() returns once the host has the bytes.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <span>
#include <utility>

namespace holmes::device {

// A point in a backend's queue (a recorded CUDA event): wait() returns once everything
// queued before the fence was made has finished. Any thread may wait; throws on a device
// error.
class QueueFence {
 public:
  virtual ~QueueFence() = default;
  virtual void wait() = 0;
  // True once passed; never blocks.
  virtual bool done() = 0;
  // Work queued on `queue` after this call starts after the fence's work, without the host
  // waiting (cudaStreamWaitEvent).
  virtual void hold(void* queue) = 0;
  // Milliseconds the device took from `start` to this fence, both made by timed_fence_on()
  // and both passed (cudaEventElapsedTime); 0 for fences that keep no time.
  virtual double ms_since(QueueFence& /*start*/) { return 0; }
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual const char* name() const = 0;
  // `bytes` of backend memory, uninitialised; throws on exhaustion. release(nullptr) is a no-op.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;         // backend -> backend
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;      // host -> backend
  virtual void download(void* host, const void* src, size_t bytes) = 0;    // backend -> host, complete
  virtual void synchronize() = 0;  // everything queued so far has finished
  // The queue kernels, copies and collectives are ordered on: a cudaStream_t on CUDA, null on
  // the CPU (every call there completes before it returns).
  virtual void* stream() const { return nullptr; }
  // True when this memory is host memory the CPU may read and write directly (the CPU
  // backend): callers may then skip staging copies.
  virtual bool is_host() const { return false; }
  // MiB of device memory in use on this backend's device (a GPU: total - free, the CUDA
  // context and other processes included); 0 for host memory.
  virtual double device_used_mb() const { return 0; }
  // True when p points into device memory of this backend, which host code cannot read (so
  // a host-memory collective must stage it); false for host memory and for host pointers.
  virtual bool holds(const void* /*p*/) const { return false; }

  // A second queue for work that may run beside stream() (the data-parallel reduce-scatters
  // on NCCL groups), made on first use; null where every call completes in order (the CPU).
  virtual void* side_stream() { return nullptr; }
  // Work queued on `to` after this call starts after everything queued on `from` before it
  // (an event recorded on `from` that `to` waits for). No-op where queues are null.
  virtual void order(void* /*from*/, void* /*to*/) {}
  // copy() and zero() queued on `queue` (stream() or side_stream()) instead of stream().
  virtual void copy_on(void* /*queue*/, void* dst, const void* src, size_t bytes) { copy(dst, src, bytes); }
  virtual void zero_on(void* /*queue*/, void* p, size_t bytes) { zero(p, bytes); }

  // Host memory for copies that run beside the host (page-locked on CUDA, so a queued copy
  // to or from it neither waits for the host nor goes through a bounce buffer); plain host
  // memory elsewhere. release_pinned(nullptr) is a no-op.
  virtual void* allocate_pinned(size_t bytes) { return ::operator new(bytes > 0 ? bytes : 1); }
  virtual void release_pinned(void* p) noexcept { ::operator delete(p); }
  // Copies between pinned host memory and the backend, queued on stream() and returning at
  // once: the bytes have moved only when a fence() made after the call has passed, and the
  // host buffer must stay untouched until then. Where every call completes in order (the
  // CPU) they are plain copies.
  virtual void download_queued(void* pinned, const void* src, size_t bytes) { download(pinned, src, bytes); }
  virtual void upload_queued(void* dst, const void* pinned, size_t bytes) { upload(dst, pinned, bytes); }
  // A fence after everything queued on `queue` (stream() or side_stream()) so far; null where
  // that has all finished.
  virtual std::shared_ptr<QueueFence> fence_on(void* /*queue*/) { return nullptr; }
  std::shared_ptr<QueueFence> fence() { return fence_on(stream()); }
  // A fence that also records when the device reached it (for ms_since); null where the
  // queue's work is timed on the host (every call completes before it returns).
  virtual std::shared_ptr<QueueFence> timed_fence_on(void* /*queue*/) { return nullptr; }
  // Makes the calling thread's runtime calls act on this backend's device (cudaSetDevice): a
  // communication thread calls it first, or its copies and kernels would go to device 0.
  virtual void bind_thread() {}
};

// An array of T in a backend's memory, owned (RAII), moved not copied.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(DeviceMemory& mem, size_t n) : mem_(&mem), n_(n) {
    if (n > 0) data_ = static_cast<T*>(mem.allocate(n * sizeof(T)));
  }
  ~DeviceArray() {
    if (mem_) mem_->release(data_);
  }
  DeviceArray(DeviceArray&& o) noexcept
      : mem_(std::exchange(o.mem_, nullptr)), data_(std::exchange(o.data_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      if (mem_) mem_->release(data_);
      mem_ = std::exchange(o.mem_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return n_; }
  void zero() {
    if (n_ > 0) mem_->zero(data_, n_ * sizeof(T));
  }
  // Host <-> backend copies of the first host.size() elements.
  void upload(std::span<const T> host) { mem_->upload(data_, host.data(), host.size() * sizeof(T)); }
  void download(std::span<T> host) const { mem_->download(host.data(), data_, host.size() * sizeof(T)); }

 private:
  DeviceMemory* mem_ = nullptr;
  T* data_ = nullptr;
  size_t n_ = 0;
};

}  // namespace holmes::device
