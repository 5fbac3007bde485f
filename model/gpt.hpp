// GPT-2 forward and backward over one rank's shard (tensor-parallel slice of its pipeline
// stage's layers). Owns the parameter, gradient and activation buffers; activations are
// sized once for (max_B, max_T) and reused, so a step allocates nothing.
//
// Single rank (tp = 1, one stage):
//   Gpt gpt(GptConfig::gpt2(...), kernels, B, T);  gpt.init_weights(seed);
//   gpt.zero_grad(); for each micro-batch { loss = gpt.forward(tok, tgt, B, T); gpt.backward(1.f/M); }
//   optimizer over gpt.params() / gpt.grads() (gpt.layout() says which ranges decay).
// Pipeline stages: forward_stage() takes tokens on the first stage or the previous stage's
// output (B,T,C) otherwise; a non-last stage exposes output() and its backward_stage() takes
// the gradient of that output; input_grad() is what a non-first stage sends back.
#pragma once

#include <cstdint>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/kernels.hpp"
#include "model/param_layout.hpp"
#include "model/tp_comm.hpp"

namespace holmes::model {

class Gpt {
 public:
  // cfg is finalized here. kernels and comm must outlive the model; comm == nullptr means
  // tp = 1 (cfg.tp_size must then be 1). max_B, max_T bound every later micro-batch.
  Gpt(GptConfig cfg, Kernels& kernels, int max_B, int max_T, TensorParallelComm* comm = nullptr);
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // GPT-2 init: weights N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2L)), biases 0, LN weight 1.
  // Every element is a pure function of (seed, tensor name, index in the full tensor), so
  // any tp/pp sharding holds exactly the slices of the same global model.
  void init_weights(uint64_t seed);

  // Whole model (first and last stage): returns the mean loss over B*T targets. targets ==
  // nullptr computes logits only (inference) and returns 0.
  float forward(const int* tokens, const int* targets, int B, int T);
  // Any stage: tokens (B,T) on the first stage, else input (B,T,C); targets on the last.
  void forward_stage(const int* tokens, const float* input, const int* targets, int B, int T);

  void zero_grad();
  // Last stage: accumulates into grads() the gradient of loss_scale * (mean loss of the last
  // forward). Gradient accumulation over M micro-batches: loss_scale = 1/M.
  void backward(float loss_scale = 1.0f);
  // Non-last stage: accumulates grads given doutput (B,T,C), the gradient of output().
  void backward_stage(const float* doutput);

  float loss() const { return loss_; }            // mean loss of the last forward
  const float* losses() const { return losses_; }  // (B,T) per-position losses
  const float* logits() const { return logits_; }  // (B,T,Vl) this shard's logits (pre-backward)
  const float* output() const;                     // (B,T,C) stage output (non-last stage)
  const float* input_grad() const { return dres_; }  // (B,T,C) after backward (non-first stage)

  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  size_t num_params() const { return layout_.size(); }
  const ParamLayout& layout() const { return layout_; }
  const GptConfig& config() const { return cfg_; }
  // Floats of activation + activation-gradient buffers (for memory reports).
  size_t activation_floats() const { return acts_.size(); }
  // Model FLOPs of one forward+backward over B*T tokens on this shard (matmuls+attention).
  double flops_per_step(int B, int T) const;

 private:
  struct LayerParams;  // pointers into a flat buffer for one layer
  struct LayerActs;    // pointers into acts_ for one layer
  LayerParams layer_params(float* base, int local_layer) const;
  LayerActs layer_acts(int local_layer) const;
  void plan_activations();
  void check_shape(int B, int T) const;
  void block_forward(int l, const float* x, int B, int T);
  void block_backward(int l, const float* x, int B, int T);
  void head_forward(const int* targets, int B, int T);
  void head_backward(float loss_scale, int B, int T);
  void stage_backward(int B, int T);

  GptConfig cfg_;
  Kernels& k_;
  NoTensorParallel no_comm_;
  TensorParallelComm* comm_;
  int max_B_, max_T_;
  ParamLayout layout_;
  std::vector<float> params_, grads_, acts_;
  std::vector<int> tokens_, targets_;
  int B_ = 0, T_ = 0;
  bool have_targets_ = false;
  float loss_ = 0.0f;

  // Activation pointers into acts_ (shapes per max_B, max_T; see plan_activations()).
  float* encoded_ = nullptr;  // (B,T,C) stage input
  float* layer_base_ = nullptr;
  size_t layer_stride_ = 0;
  float* lnf_ = nullptr;
  float* lnf_mean_ = nullptr;
  float* lnf_rstd_ = nullptr;
  float* logits_ = nullptr;
  float* losses_ = nullptr;
  float* row_max_ = nullptr;
  float* ce_stats_ = nullptr;
  float* scratch_ = nullptr;  // (B,T,C) row-parallel outputs before the residual add
  float* dres_ = nullptr;     // (B,T,C) gradient of the residual stream
  float* dln_ = nullptr;      // (B,T,C)
  float* dqkv_ = nullptr;     // (B,T,3Cl)
  float* datty_ = nullptr;    // (B,T,Cl)
  float* dfch_ = nullptr;     // (B,T,Fl)
  float* datt_ = nullptr;     // (B,NHl,T,T) attention backward workspace
};

}  // namespace holmes::model
