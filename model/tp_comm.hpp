// How the model talks to its tensor-parallel peers. The model needs only in-place
// all-reduces over the TP group; the distributed runtime implements this interface on top of
// NCCL or Gloo, a single rank uses NoTensorParallel (every call is a no-op).
#pragma once

#include <cstddef>

namespace holmes::model {

class TensorParallelComm {
 public:
  virtual ~TensorParallelComm() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // data (count) is replaced by the element-wise sum / max over the TP group.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  virtual void all_reduce_max(float* data, size_t count) = 0;
  // The same sum of `count` bf16 values (model/bf16.hpp) in place, in the activation precision.
  virtual void all_reduce_sum_bf16(void* data, size_t count) = 0;
};

class NoTensorParallel final : public TensorParallelComm {
 public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_max(float*, size_t) override {}
  void all_reduce_sum_bf16(void*, size_t) override {}
};

}  // namespace holmes::model
