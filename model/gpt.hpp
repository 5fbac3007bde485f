// GPT-2 and Llama (model/gpt_config.hpp: arch) forward and backward over one rank's shard (tensor-parallel slice of its pipeline
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
//
// Precision (model/bf16.hpp): fp32 computes everything in fp32. fp8 is bf16 below with the
// linear layers' GEMMs in FP8 (the blocks' QKV, attention output and MLP layers, and the LM
// head when the recipe says so; model/fp8_recipe.hpp). bf16 keeps fp32 master
// weights (params()) and fp32 gradients (grads()), a bf16 copy of the weights that the
// kernels read (refreshed by params_updated() after every change of params()), and bf16
// activations with fp32 LayerNorm statistics, losses and softmax statistics. The stage
// boundary (forward_stage's input, output(), backward_stage's gradient, input_grad()) is in
// the activation precision, as boundary_floats() floats: fp32 values, or for bf16 the bf16
// values' bits two per float (the last half unused when B*T*C is odd). The activations and
// their gradients are bf16 on both sides already, so a bf16 boundary is exact and halves what
// a pipeline sends between stages.
#pragma once

#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/backend.hpp"
#include "model/bf16.hpp"
#include "model/fp8_recipe.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"
#include "model/tp_comm.hpp"

namespace holmes::model {

// What a block keeps for its backward (train.recompute; docs/training.md has the memory per mode):
//   kNone       every activation of every layer, per micro-batch in flight;
//   kSelective  the GEMM outputs (qkv, the MLP's pre-activation), the residual stream (res2,
//               res3) and, for a fused attention (no probabilities kept), its output and state.
//               The norms, the MLP's activation function and an unfused attention's softmax are
//               replayed from those before the layer's backward (Korthikanti et al. 2022);
//   kFull       the layer's output only (the next layer's input): the layer's forward is replayed
//               before its backward, all but its last GEMM, which the backward does not read.
// What is replayed goes into one layer's buffers that every layer and slot share, so memory
// no longer grows with layers x micro-batches for them. The replay runs the forward's own
// kernels on the same inputs, so its values are the forward's bit for bit (deterministic
// kernels; the TP sums a full replay repeats are too).
enum class Recompute { kNone, kSelective, kFull };
const char* recompute_name(Recompute r);  // "none", "selective", "full"

struct ActivationPolicy {
  Recompute recompute = Recompute::kNone;
  // The backward of a micro-batch runs as two passes a schedule may separate (zero-bubble,
  // arXiv 2401.10241): B (backward with Pass::kInput: every input gradient, the norms' weight
  // gradients) and W (backward_weights: the GEMMs' weight gradients and the embedding's).
  // Each layer then keeps the gradients of its GEMM outputs from B to W in its slot. Such a
  // model still runs a whole backward (Pass::kAll) as one pass, for a W that would follow its
  // B at once.
  bool split_backward = false;
  // The stage boundary (output(), input_grad(), forward_stage's input, backward_stage's
  // gradient) in FP8 (parallel.pipe_fp8): each tensor cast with its own current scale, E4M3
  // for activations, E5M2 for gradients, packed as model::fp8_boundary_floats (a quarter of
  // fp32's bytes, half of bf16's, plus two floats). Else the activation type's bytes.
  bool fp8_boundary = false;
};

// Which part of a micro-batch's backward a call runs: both, or B / W of split_backward.
enum class Pass { kAll, kInput, kWeights };

class Gpt {
 public:
  // cfg is finalized here. backend and comm must outlive the model; comm == nullptr means
  // tp = 1 (cfg.tp_size must then be 1). max_B, max_T bound every later micro-batch.
  // slots: activation sets for micro-batches in flight at once (pipeline 1F1B); forward and
  // backward of one micro-batch must use the same slot. precision: see above; bf16 needs a
  // backend whose kernels support it (std::invalid_argument otherwise).
  // policy: what the activation slots keep and whether backward splits (above). fp8: the
  // recipe of the FP8 GEMMs (read with Precision::kFp8 only).
  Gpt(GptConfig cfg, Backend& backend, int max_B, int max_T, TensorParallelComm* comm = nullptr, int slots = 1,
      Precision precision = Precision::kFp32, ActivationPolicy policy = {}, const Fp8Recipe& fp8 = {});
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // GPT-2 init: weights N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2L)), biases 0, LN weight 1.
  // Llama init (Hugging Face's): every matrix N(0, 0.02), RMSNorm weights 1.
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
  // pass kInput (split_backward only): B alone; backward_weights() later runs W.
  void backward(float loss_scale = 1.0f, Pass pass = Pass::kAll);
  // Non-last stage: accumulates grads given doutput (B,T,C, backend memory), the gradient of
  // output(). pass as for backward().
  void backward_stage(const float* doutput, Pass pass = Pass::kAll);
  // W of the current slot's micro-batch, whose B ran (split_backward): the GEMMs' weight
  // gradients (and the embedding's), accumulated in the order the one-pass backward adds them,
  // so B then W gives its gradients bit for bit whatever runs between them. The grad-ready
  // hook reports during W (in a split backward, B finishes no range).
  void backward_weights();
  const ActivationPolicy& policy() const { return policy_; }

  // Selects the activation set later forward/backward calls use (0 <= slot < slots()).
  void set_slot(int slot);
  int slot() const { return slot_; }
  int slots() const { return static_cast<int>(slot_state_.size()); }
  // Called during backward()/backward_stage() (backward_weights() when split) each time the gradient range [begin, end) of
  // the flat buffer is complete for this backward: the head (ln_f, tied wte copy), then each
  // layer from the last, then the embedding (wte, wpe: after the embedding backward, since
  // a whole-model wte also takes the head's gradient). Ranges arrive in descending order
  // and cover the buffer once per backward. Empty function = no calls.
  void set_grad_ready_hook(std::function<void(size_t begin, size_t end)> hook) { grad_ready_ = std::move(hook); }
  // Called during backward()/backward_stage() (backward_weights() when split) as soon as this
  // backward's share of a tied embedding's gradient is in: on a last stage after the head's
  // weight gradient (its tied copy of wte), on a first stage after the embedding backward,
  // which a W pass runs before the blocks' W (the order of every other addition unchanged),
  // so that the sum over the embedding group can start while the blocks' W still runs. Not
  // called in a B pass, nor on a shard without a tied embedding. Empty function = no calls.
  void set_tied_grad_hook(std::function<void()> hook) { tied_grad_ = std::move(hook); }
  // Called during forward()/forward_stage() before the kernels first read the weights of
  // [begin, end) of the flat buffer: the embedding (wte, wpe), each layer, the head (ln_f and
  // a tied copy of wte). Ranges arrive in ascending order and cover the buffer once per
  // forward. The hook may write params() in its range (the distributed optimizer's deferred
  // all-gather lands there) and must then call params_updated(begin, end).
  void set_params_needed_hook(std::function<void(size_t begin, size_t end)> hook) {
    params_needed_ = std::move(hook);
  }

  // Mean loss of the last forward with targets (0 without). Reads it from backend memory, so
  // on a GPU it waits for that forward; a training loop takes the sum once per step instead.
  float loss() const;
  // The sum (in double, in forward order) of the mean losses of every forward with targets
  // since the last call: one read of backend memory for all of them, which waits for the
  // last. The losses stay on the device until then (a log of kLossLog; more pending
  // forwards are read early, in order).
  double take_loss_sum();
  const float* losses() const;          // (B,T) per-position losses, backend memory (last stage)
  // Row `row` (b * T + t) of this shard's logits (Vl values, pre-backward) into host memory.
  void read_logits(size_t row, std::span<float> host) const;
  const float* output() const;  // (B,T,C) stage output (non-last stage), boundary format
  const float* input_grad() const;  // (B,T,C) after backward (non-first stage), boundary format
  // Floats of a (B,T,C) boundary tensor: B*T*C in fp32, ceil(B*T*C / 2) in bf16,
  // fp8_boundary_floats(B*T*C) with ActivationPolicy::fp8_boundary.
  size_t boundary_floats(int B, int T) const;

  // After anything wrote params() (an optimizer step; load_params and init_weights do it
  // themselves): refreshes the bf16 copy the kernels read. A no-op in fp32.
  void params_updated();
  // The same for the range [begin, end) of params() alone.
  void params_updated(size_t begin, size_t end);
  Precision precision() const { return precision_; }
  const Fp8Recipe& fp8_recipe() const { return fp8_; }
  // How attention is computed here (Kernels::plan_attention), for the start-up log.
  const std::string& attention_method() const { return attention_.method; }

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
  // Bytes of activation + activation-gradient buffers (for memory reports).
  size_t activation_bytes() const { return acts_.size(); }
  // Of those, the bytes one layer keeps per slot (the memory model's per-layer figure).
  size_t layer_slot_bytes() const;
  Backend& backend() const { return backend_; }
  // Model FLOPs of one forward+backward over B*T tokens on this shard (matmuls+attention).
  double flops_per_step(int B, int T) const { return flops_per_step(cfg_, B, T); }
  // The same for any (finalized) shard config, e.g. the whole model's.
  static double flops_per_step(const GptConfig& cfg, int B, int T);

 private:
  template <class A> struct LayerParams;  // pointers into a flat buffer for one GPT-2 layer
  template <class A> struct LlamaLayerParams;  // the same for one Llama layer
  template <class A> struct LayerActs;    // pointers into acts_ for one layer
  template <class A> struct LayerGrads;   // its GEMM output gradients (slot in a split backward)
  template <class A> struct Shared;       // the current slot's head and the shared scratch
  struct Offsets;                         // byte offsets of every activation buffer
  template <class A> LayerParams<A> layer_params(A* base, int local_layer) const;
  template <class A> LlamaLayerParams<A> llama_layer_params(A* base, int local_layer) const;
  template <class A> LayerActs<A> layer_acts(int local_layer) const;
  // The slot's buffers for B and W of a split backward; for a whole pass (kAll) one set
  // every layer reuses, even in a model that splits: nothing outlives the pass, and a reused
  // set stays in cache.
  template <class A> LayerGrads<A> layer_grads(int local_layer, Pass pass) const;
  template <class A> Shared<A> shared() const;
  template <class A> A* weights();  // what kernels read: params_ (fp32) or params16_ (bf16)
  template <class A> const A* stage_out() const;
  template <class A> void tp_sum(A* x, size_t n);
  template <class A> void forward_t(const int* tokens, const float* input, const int* targets, int B, int T);
  template <class A> void block_forward(int l, const A* x, int B, int T);
  // What policy_.recompute dropped of layer l, replayed from what it kept (x: its input).
  template <class A> void block_recompute(int l, const A* x, int B, int T);
  template <class A> void block_backward(int l, const A* x, int B, int T, Pass pass);
  // Llama's block (llama_block.cpp), mirrored op by op like GPT-2's.
  template <class A> void llama_block_forward(int l, const A* x, int B, int T);
  template <class A> void llama_block_recompute(int l, const A* x, int B, int T);
  template <class A> void llama_block_backward(int l, const A* x, int B, int T, Pass pass);
  // The linear layers (gpt_linear.cpp): the kernels' matmul ops of the activation type, or
  // their FP8 GEMMs under Precision::kFp8 (the LM head, `head`, only when the recipe says).
  template <class A> void linear_forward(A* out, const A* inp, const A* weight, const A* bias, int N, int C, int OC,
                                         bool head = false);
  // GPT-2's MLP input layer and its GELU (Kernels::matmul_gelu_forward; FP8: the GEMM, then GELU).
  template <class A> void linear_gelu_forward(A* out, A* pre, const A* inp, const A* weight, const A* bias, int N,
                                              int C, int OC);
  // The backward of a linear layer whose input is gelu(pre) (Kernels::matmul_dgelu_backward).
  template <class A> void linear_dgelu_backward(A* dpre, float* dweight, float* dbias, const A* dout, const A* inp,
                                                const A* weight, const A* pre, int N, int C, int OC);
  bool fp8_gemms(bool head) const { return precision_ == Precision::kFp8 && (!head || fp8_.lm_head); }
  // A GEMM's backward, the part `pass` asks for: kInput dinp, kWeights dweight + dbias.
  template <class A> void gemm_backward(Pass pass, A* dinp, float* dweight, float* dbias, const A* dout, const A* inp,
                                        const A* weight, int N, int C, int OC, bool head = false);
  // dst = src (N*C values) where a split backward keeps a gradient for W; nothing when they alias.
  template <class A> void keep_grad(A* dst, const A* src, size_t n);
  void make_rope_table();
  template <class A> void head_forward(const int* targets, int B, int T);
  template <class A> void head_backward(float loss_scale, int B, int T, Pass pass);
  template <class A> void stage_backward(int B, int T, Pass pass);
  // The embedding's weight gradient (wte, wpe) of the current slot: from dres (kAll) or the
  // gradient B kept (kWeights); then the tied-gradient hook where wte is tied.
  template <class A> void embedding_weight_grad(int B, int T, Pass pass);
  template <class A> void run_backward(float loss_scale, const float* doutput, Pass pass);
  // f: the FP8 format of a fp8_boundary (E4M3 activations, E5M2 gradients).
  template <class A> void to_boundary(float* out, const A* x, size_t n, Fp8Format f);
  template <class A> void from_boundary(A* out, const float* x, size_t n, Fp8Format f);
  // The boundary is a buffer of its own (bf16 pairs or FP8), not the fp32 activations.
  bool packed_boundary() const { return is_bf16() || policy_.fp8_boundary; }
  void plan_activations();
  void check_shape(int B, int T) const;
  std::byte* slot_base(int slot) const;
  void grad_ready(size_t begin, size_t end) const {
    if (grad_ready_ && begin < end) grad_ready_(begin, end);
  }
  void params_needed(size_t begin, size_t end) const {
    if (params_needed_ && begin < end) params_needed_(begin, end);
  }
  // A layer's tensors in the layout (param_layout.hpp): tensors_per_layer() from
  // layer_first_tensor, spanning layer_range = [first's offset, last's end) of the flat buffer.
  size_t layer_first_tensor(int local_layer) const;
  size_t embedding_end() const;  // end of the embedding's tensors in the flat buffer (0: none)
  std::pair<size_t, size_t> layer_range(int local_layer) const;
  bool is_bf16() const { return storage_of(precision_) == Precision::kBf16; }  // bf16 storage (fp8 too)

  // What a slot remembers between its forward and backward besides its activations.
  struct SlotState {
    int B = 0, T = 0;
    bool have_targets = false;
    int64_t loss_id = -1;  // the forward's entry in the loss log, -1 without targets
    bool weights_pending = false;  // split backward: B ran, W not yet
  };

  GptConfig cfg_;
  Backend& backend_;
  Kernels& k_;
  device::DeviceMemory& mem_;
  NoTensorParallel no_comm_;
  TensorParallelComm* comm_;
  int max_B_, max_T_;
  Precision precision_;
  Fp8Recipe fp8_;
  ActivationPolicy policy_;
  AttentionPlan attention_;
  ParamLayout layout_;
  device::DeviceArray<float> params_, grads_;
  device::DeviceArray<bf16> params16_;  // bf16 only: the weights the kernels read
  device::DeviceArray<float> rope_;     // llama: (max_T, HS) rotary cos | sin per position
  // [slot 0 | slot 1 | ... | shared gradient scratch], carved by plan_activations().
  device::DeviceArray<std::byte> acts_;
  device::DeviceArray<int> token_store_, target_store_;  // (slots, max_B * max_T)
  // Mean losses of the forwards with targets, forward n at n % kLossLog, until take_loss_sum()
  // reads them; logged_ forwards so far, taken_ read; early_ holds values read early.
  static constexpr int64_t kLossLog = 1024;
  device::DeviceArray<float> loss_log_;
  int64_t logged_ = 0, taken_ = 0;
  std::vector<float> early_;
  void read_pending_losses();  // log entries taken_ .. logged_ - 1 onto early_
  std::unique_ptr<Offsets> off_;
  std::vector<SlotState> slot_state_;
  int slot_ = 0;
  std::function<void(size_t, size_t)> grad_ready_;
  std::function<void()> tied_grad_;
  std::function<void(size_t, size_t)> params_needed_;
  // The current slot's state (saved to / loaded from slot_state_ by set_slot()).
  int B_ = 0, T_ = 0;
  bool have_targets_ = false;
  int64_t loss_id_ = -1;
  bool weights_pending_ = false;
};

}  // namespace holmes::model
