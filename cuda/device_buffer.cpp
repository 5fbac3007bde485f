#include "cuda/device_buffer.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "cuda/check.hpp"

namespace holmes::cuda {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) HOLMES_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  // Never throw from a destructor; a failing cudaFree means the context is already gone.
  if (data_) (void)cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) (void)cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

static void check_size(std::size_t want, std::size_t have, const char* what) {
  if (want > have)
    throw std::out_of_range(
        fmt::format("DeviceBuffer::{}: {} bytes asked, buffer holds {}", what, want, have));
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  check_size(bytes, bytes_, "upload");
  if (bytes) HOLMES_CUDA_CHECK(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  check_size(bytes, bytes_, "download");
  if (bytes) HOLMES_CUDA_CHECK(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::zero() {
  if (bytes_) HOLMES_CUDA_CHECK(cudaMemset(data_, 0, bytes_));
}

}  // namespace holmes::cuda
