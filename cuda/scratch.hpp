// Temporary device memory for one op call, ordered on the op's stream: the deterministic
// reductions (embedding backward's sort, LayerNorm's dweight/dbias partial sums, the sum of
// squares' block partials) need a few scratch bytes that the free functions of vocab.hpp,
// layernorm.hpp and optimizer.hpp have no parameter for. StreamScratch takes them from the
// device's default memory pool with cudaMallocAsync and returns them with cudaFreeAsync on the
// same stream, so calls on different streams never share scratch and kernels queued before
// the free finish before the memory is reused. The pool keeps freed blocks for reuse until
// the next synchronization (CUDA's default release threshold), so steady-state calls do not
// reach the driver between two host synchronizations. Where the device has no memory pools
// (cudaMallocAsync says cudaErrorNotSupported) it falls back to cudaMalloc and a stream
// synchronization before cudaFree: correct, but it stalls the host once per call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace holmes::cuda {

// Sub-buffers carved from one allocation, each starting at a 256-byte boundary (cudaMalloc's
// own alignment, enough for any vector load). Pure host arithmetic.
class ScratchLayout {
 public:
  static constexpr std::size_t kAlign = 256;
  // Reserves `bytes` and returns their offset from the start of the allocation.
  std::size_t add(std::size_t bytes);
  std::size_t bytes() const { return end_; }

 private:
  std::size_t end_ = 0;
};

class StreamScratch {
 public:
  // Allocates `bytes` (none when 0) on `stream`; throws CudaError when the pool cannot.
  StreamScratch(std::size_t bytes, cudaStream_t stream);
  // Frees on the stream if release() was not reached (an exception unwinds); errors there
  // are dropped, as a destructor cannot report them.
  ~StreamScratch();
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  template <class T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + offset);
  }
  // Queues the free after the kernels that use the scratch; checked (throws CudaError).
  void release();

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
  bool pooled_ = true;  // false: cudaMalloc'd (no memory pools here), freed after a sync
};

}  // namespace holmes::cuda
