// DeviceBuffer: one cudaMalloc'd allocation owned by RAII, with host<->device copies.
// The parameter/gradient/activation buffers of the CUDA backend and the tests use it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace holmes::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);  // throws CudaError when cudaMalloc fails
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

  // Synchronous copies of the first `bytes` bytes; `bytes` must be <= bytes().
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  void zero();

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Helpers for tests and small host tables: a buffer holding a copy of `host`, and back.
template <class T>
DeviceBuffer to_device(const std::vector<T>& host) {
  DeviceBuffer buf(host.size() * sizeof(T));
  buf.upload(host.data(), host.size() * sizeof(T));
  return buf;
}

template <class T>
std::vector<T> to_host(const DeviceBuffer& buf, std::size_t count) {
  std::vector<T> host(count);
  buf.download(host.data(), count * sizeof(T));
  return host;
}

}  // namespace holmes::cuda
