// gptj's parallel block (model/block.hpp has the contract). Holds the rotary table of its model.
#pragma once

#include "device/device_memory.hpp"
#include "model/block.hpp"

namespace holmes::test::gptj {

class Block {
 public:
  Block(const model::GptConfig& cfg, device::DeviceMemory& mem, int max_T);
  template <class A>
  void forward(const model::BlockEnv& e, const model::BlockIo<A>& io);
  template <class A>
  void recompute(const model::BlockEnv& e, const model::BlockIo<A>& io);
  template <class A>
  void backward(const model::BlockEnv& e, const model::BlockIo<A>& io, model::Pass pass);

 private:
  device::DeviceArray<float> rope_;  // (max_T, HS)
};

}  // namespace holmes::test::gptj
