// GPT-2's transformer block (model/block.hpp has the contract): pre-LayerNorm, fused q/k/v
// projection, causal attention, row-parallel output projection; pre-LayerNorm, MLP of 4C with
// GELU, row-parallel projection.
#pragma once

#include "model/block.hpp"

namespace holmes::model::gpt2 {

struct Block {
  template <class A>
  void forward(const BlockEnv& e, const BlockIo<A>& io);
  template <class A>
  void recompute(const BlockEnv& e, const BlockIo<A>& io);
  template <class A>
  void backward(const BlockEnv& e, const BlockIo<A>& io, Pass pass);
};

}  // namespace holmes::model::gpt2
