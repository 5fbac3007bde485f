// An architecture's transformer block as model::Gpt runs it: forward, the replay of what the
// activation policy dropped (activation_policy.hpp: Recompute) and backward, each for one layer
// of one micro-batch, written from Kernels ops in both activation types (fp32 and bf16; the
// weights the kernels read are in the same type, gradients are fp32).
//
// An architecture implements its block as a class with three member templates
//   template <class A> void forward(const BlockEnv&, const BlockIo<A>&);
//   template <class A> void recompute(const BlockEnv&, const BlockIo<A>&);
//   template <class A> void backward(const BlockEnv&, const BlockIo<A>&, Pass);
// and returns it as BlocksOf<ItsClass> from Architecture::make_blocks. The contract:
//   forward    reads io.x, writes its layer buffers and the block output (its Keep::kOutput
//              buffer), sums row-parallel outputs over the tensor-parallel group (tp_sum);
//   recompute  rewrites, from io.x and what the slot kept, every buffer the policy did not keep
//              (kept_in_slot) that backward reads, with the forward's own kernels on the same
//              inputs, so the values are the forward's bit for bit;
//   backward   io.dres holds the gradient of the block output on entry and must hold the
//              gradient of io.x on return (the norms' backward accumulates into it); weight
//              gradients accumulate into io.g. pass (Pass): kAll both parts, kInput (B) every
//              input gradient and the norms' weight gradients, kWeights (W) the GEMMs' weight
//              gradients alone, from the GEMM output gradients B left in the kWeightGrad buffers.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "device/device_memory.hpp"
#include "model/activation_policy.hpp"
#include "model/bf16.hpp"
#include "model/gpt_config.hpp"
#include "model/kernels.hpp"
#include "model/tp_comm.hpp"

namespace holmes::model {

inline constexpr int kMaxLayerTensors = 32;  // per layer (Architecture::layer_tensors)
inline constexpr int kMaxLayerBuffers = 32;  // per layer (Architecture::layer_buffers)
inline constexpr int kMaxScratch = 8;        // Architecture::gradient_scratch

// What every block call may use besides its layer.
struct BlockEnv {
  Kernels& k;
  device::DeviceMemory& mem;
  TensorParallelComm& comm;
  const GptConfig& cfg;  // the shard
  const ActivationPolicy& policy;
  const AttentionPlan& attention;  // Kernels::plan_attention for this shard
};

// One layer of one micro-batch. Pointers are backend memory; shapes in the legend of
// gpt_config.hpp, N = B*T.
template <class A>
struct BlockIo {
  int B = 0, T = 0;
  const int* pos = nullptr;                 // (B,T) document positions (data.document_mask); null: causal over T
  const A* x = nullptr;                     // (N,C) the layer's input
  std::array<A*, kMaxLayerTensors> w{};     // its tensors in layout order, as the kernels read them
  std::array<float*, kMaxLayerTensors> g{}; // their fp32 gradients
  // Its buffers in the order of Architecture::layer_buffers: where the slot keeps them, or the
  // working buffers replays share; a kWeightGrad buffer of a whole pass (kAll) is the residual
  // gradient dres (residual_grad) or one shared buffer.
  std::array<void*, kMaxLayerBuffers> buf{};
  std::array<A*, kMaxScratch> scratch{};    // Architecture::gradient_scratch, shared by every layer
  A* out = nullptr;    // (N,C) a row-parallel GEMM's output before its sum and residual add
  A* dres = nullptr;   // (N,C) the gradient of the residual stream (see the backward contract)
  A* dln = nullptr;    // (N,C) the gradient of a norm's output
  float* datt = nullptr;  // attention backward's workspace (AttentionPlan::scratch_floats)

  int rows() const { return B * T; }
  A* act(int i) const { return static_cast<A*>(buf[i]); }
  float* f32(int i) const { return static_cast<float*>(buf[i]); }
};

// x (n) in place: the sum over the tensor-parallel group, in the activation precision (NCCL
// sums bf16 itself; a host group widens to fp32, sums and rounds once).
template <class A>
void tp_sum(const BlockEnv& e, A* x, size_t n) {
  if constexpr (std::is_same_v<A, float>) {
    e.comm.all_reduce_sum(x, n);
  } else if (e.comm.size() != 1) {
    e.comm.all_reduce_sum_bf16(x, n);
  }
}

// A GEMM's backward, the part `pass` asks for: kInput dinp, kWeights dweight + dbias, kAll all.
template <class A>
void gemm_backward(const BlockEnv& e, Pass pass, A* dinp, float* dweight, float* dbias, const A* dout, const A* inp,
                   const A* weight, int N, int C, int OC) {
  if (pass == Pass::kInput) dweight = dbias = nullptr;
  if (pass == Pass::kWeights) dinp = nullptr;
  e.k.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

// dst = src (n values) where a split backward keeps a gradient for W; nothing when they alias.
template <class A>
void keep_grad(const BlockEnv& e, A* dst, const A* src, size_t n) {
  if (dst != src) e.mem.copy(dst, src, n * sizeof(A));
}

class Blocks {
 public:
  virtual ~Blocks() = default;
  virtual void forward(const BlockEnv& e, const BlockIo<float>& io) = 0;
  virtual void forward(const BlockEnv& e, const BlockIo<bf16>& io) = 0;
  virtual void recompute(const BlockEnv& e, const BlockIo<float>& io) = 0;
  virtual void recompute(const BlockEnv& e, const BlockIo<bf16>& io) = 0;
  virtual void backward(const BlockEnv& e, const BlockIo<float>& io, Pass pass) = 0;
  virtual void backward(const BlockEnv& e, const BlockIo<bf16>& io, Pass pass) = 0;
};

// Blocks of a class with the three member templates above, for both activation types.
template <class Impl>
class BlocksOf final : public Blocks {
 public:
  template <class... Args>
  explicit BlocksOf(Args&&... args) : impl_(std::forward<Args>(args)...) {}
  void forward(const BlockEnv& e, const BlockIo<float>& io) override { impl_.forward(e, io); }
  void forward(const BlockEnv& e, const BlockIo<bf16>& io) override { impl_.forward(e, io); }
  void recompute(const BlockEnv& e, const BlockIo<float>& io) override { impl_.recompute(e, io); }
  void recompute(const BlockEnv& e, const BlockIo<bf16>& io) override { impl_.recompute(e, io); }
  void backward(const BlockEnv& e, const BlockIo<float>& io, Pass p) override { impl_.backward(e, io, p); }
  void backward(const BlockEnv& e, const BlockIo<bf16>& io, Pass p) override { impl_.backward(e, io, p); }

 private:
  Impl impl_;
};

}  // namespace holmes::model
