// Llama's transformer block (model/block.hpp has the contract): pre-RMSNorm, fused q/k/v
// projection with rotary embeddings on q and k, grouped-query attention, row-parallel output
// projection; pre-RMSNorm, fused gate/up projection, SwiGLU, row-parallel down projection. No
// biases. Holds the rotary table of its model.
#pragma once

#include "device/device_memory.hpp"
#include "model/block.hpp"

namespace holmes::model::llama {

class Block {
 public:
  Block(const GptConfig& cfg, device::DeviceMemory& mem, int max_T);
  template <class A>
  void forward(const BlockEnv& e, const BlockIo<A>& io);
  template <class A>
  void recompute(const BlockEnv& e, const BlockIo<A>& io);
  template <class A>
  void backward(const BlockEnv& e, const BlockIo<A>& io, Pass pass);

 private:
  device::DeviceArray<float> rope_;  // (max_T, HS) rotary cos | sin per position
};

}  // namespace holmes::model::llama
