// GPT-2 forward and backward over one rank's shard (tensor-parallel slice of its pipeline
// stage's layers). Owns the parameter, gradient and activation buffers, all in the memory of
// its backend (model/backend.hpp: host memory on the CPU, device memory on a GPU); it moves
// bytes only through the backend's DeviceMemory and computes only through its Kernels, so
// the same code runs on either. Activations are sized once for (max_B, max_T) and reused, so
// a step allocates nothing. Host arrays (tokens, targets, weights to load or read) are
// uploaded and downloaded at the edges.
//
// Single rank (tp = 1, one stage):
//   Gpt gpt(GptConfig::gpt2(...), backend, B, T);  gpt.init_weights(seed);
//   gpt.zero_grad(); for each micro-batch { loss = gpt.forward(tok, tgt, B, T); gpt.backward(1.f/M); }
//   optimizer over gpt.params() / gpt.grads() (gpt.layout() says which ranges decay).
// Pipeline stages: forward_stage() takes tokens on the first stage or the previous stage's
// output (B,T,C) otherwise; a non-last stage exposes output() and its backward_stage() takes
// the gradient of that output; input_grad() is what a non-first stage sends back.
// Pipeline schedules keep several micro-batches in flight: `slots` activation sets (one per
// in-flight micro-batch, chosen with set_slot(); the gradient scratch is shared), and a
// grad-ready hook tells the distributed optimizer which gradient ranges are final.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/backend.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"
#include "model/tp_comm.hpp"

namespace holmes::model {

class Gpt {
 public:
  // cfg is finalized here. backend and comm must outlive the model; comm == nullptr means
  // tp = 1 (cfg.tp_size must then be 1). max_B, max_T bound every later micro-batch.
  // slots: activation sets for micro-batches in flight at once (pipeline 1F1B); forward and
  // backward of one micro-batch must use the same slot.
  Gpt(GptConfig cfg, Backend& backend, int max_B, int max_T, TensorParallelComm* comm = nullptr, int slots = 1);
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // GPT-2 init: weights N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2L)), biases 0, LN weight 1.
  // Every element is a pure function of (seed, tensor name, index in the full tensor), so
  // any tp/pp sharding holds exactly the slices of the same global model.
  void init_weights(uint64_t seed);

  // Whole model (first and last stage): returns the mean loss over B*T targets. tokens and
  // targets are host arrays; targets == nullptr computes logits only (inference), returns 0.
  float forward(const int* tokens, const int* targets, int B, int T);
  // Any stage: tokens (B,T, host) on the first stage, else input (B,T,C, backend memory);
  // targets (host) on the last.
  void forward_stage(const int* tokens, const float* input, const int* targets, int B, int T);

  void zero_grad();
  // Last stage: accumulates into grads() the gradient of loss_scale * (mean loss of the last
  // forward). Gradient accumulation over M micro-batches: loss_scale = 1/M.
  void backward(float loss_scale = 1.0f);
  // Non-last stage: accumulates grads given doutput (B,T,C, backend memory), the gradient of
  // output().
  void backward_stage(const float* doutput);

  // Selects the activation set later forward/backward calls use (0 <= slot < slots()).
  void set_slot(int slot);
  int slot() const { return slot_; }
  int slots() const { return static_cast<int>(slot_state_.size()); }
  // Called during backward()/backward_stage() each time the gradient range [begin, end) of
  // the flat buffer is complete for this backward: the head (ln_f, tied wte copy), then each
  // layer from the last, then the embedding (wte, wpe: after the embedding backward, since
  // a whole-model wte also takes the head's gradient). Ranges arrive in descending order
  // and cover the buffer once per backward. Empty function = no calls.
  void set_grad_ready_hook(std::function<void(size_t begin, size_t end)> hook) { grad_ready_ = std::move(hook); }

  float loss() const { return loss_; }            // mean loss of the last forward
  const float* losses() const { return losses_; }  // (B,T) per-position losses
  const float* logits() const { return logits_; }  // (B,T,Vl) this shard's logits (pre-backward)
  const float* output() const;                     // (B,T,C) stage output (non-last stage)
  const float* input_grad() const { return dres_; }  // (B,T,C) after backward (non-first stage)

  // The whole parameter buffer to and from host memory: [num_params()] floats in layout
  // order. std::invalid_argument when the size differs.
  void load_params(std::span<const float> host);
  void read_params(std::span<float> host) const;
  std::vector<float> read_params() const;

  // Backend memory: for kernels, the optimizer and collectives, never for host code.
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  size_t num_params() const { return layout_.size(); }
  const ParamLayout& layout() const { return layout_; }
  const GptConfig& config() const { return cfg_; }
  // Floats of activation + activation-gradient buffers (for memory reports).
  size_t activation_floats() const { return acts_.size(); }
  Backend& backend() const { return backend_; }
  // Model FLOPs of one forward+backward over B*T tokens on this shard (matmuls+attention).
  double flops_per_step(int B, int T) const { return flops_per_step(cfg_, B, T); }
  // The same for any (finalized) shard config, e.g. the whole model's.
  static double flops_per_step(const GptConfig& cfg, int B, int T);

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
  void point_slot(int slot);
  void grad_ready(size_t begin, size_t end) const {
    if (grad_ready_ && begin < end) grad_ready_(begin, end);
  }

  // What a slot remembers between its forward and backward besides its activations.
  struct SlotState {
    int B = 0, T = 0;
    bool have_targets = false;
    float loss = 0.0f;
  };

  GptConfig cfg_;
  Backend& backend_;
  Kernels& k_;
  DeviceMemory& mem_;
  NoTensorParallel no_comm_;
  TensorParallelComm* comm_;
  int max_B_, max_T_;
  ParamLayout layout_;
  DeviceArray<float> params_, grads_, acts_;
  DeviceArray<int> token_store_, target_store_;  // (slots, max_B * max_T)
  DeviceArray<float> loss_dev_;                  // (1) the mean loss before it is read
  std::vector<SlotState> slot_state_;
  int slot_ = 0;
  size_t slot_floats_ = 0;  // activation floats of one slot
  std::function<void(size_t, size_t)> grad_ready_;
  // The current slot's state (saved to / loaded from slot_state_ by set_slot()).
  int B_ = 0, T_ = 0;
  bool have_targets_ = false;
  float loss_ = 0.0f;

  // Activation pointers into acts_ (shapes per max_B, max_T; see plan_activations()); the
  // ones up to ce_stats_ point into the current slot, the gradient scratch is shared.
  int* tokens_ = nullptr;     // (B,T) current slot's tokens
  int* targets_ = nullptr;    // (B,T)
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
