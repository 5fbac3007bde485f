// A decoder model of any registered architecture (gpt_config.hpp: arch; architecture.hpp):
// forward and backward over one rank's shard (tensor-parallel slice of its pipeline stage's
// layers). The embedding, the final norm, the LM head with its vocabulary-parallel
// cross-entropy, the activation slots and the pipeline boundary are the same for every
// architecture and live here; the blocks are the architecture's (block.hpp). Owns the parameter, gradient and activation buffers, all in the memory of
// its backend (model/backend.hpp: host memory on the CPU, device memory on a GPU); it moves
// bytes only through the backend's DeviceMemory and computes only through its Kernels, so
// the same code runs on either. Activations are sized once for (max_B, max_T) and reused, so
// a step allocates nothing. Host arrays (tokens, targets, weights to load or read) are
// uploaded and downloaded at the edges.
//
// Single rank (tp = 1, one stage):
//   Gpt gpt(gpt2::config(...), backend, B, T);  gpt.init_weights(seed);
//   gpt.zero_grad(); for each micro-batch { loss = gpt.forward(tok, tgt, B, T); gpt.backward(1.f/M); }
//   optimizer over gpt.params() / gpt.grads() (gpt.layout() says which ranges decay).
// Pipeline stages: forward_stage() takes tokens on the first stage or the previous stage's
// output (B,T,C) otherwise; a non-last stage exposes output() and its backward_stage() takes
// the gradient of that output; input_grad() is what a non-first stage sends back.
// Pipeline schedules keep several micro-batches in flight: `slots` activation sets (one per
// in-flight micro-batch, chosen with set_slot(); the gradient scratch is shared), and a
// grad-ready hook tells the distributed optimizer which gradient ranges are final.
//
// Precision (a DType, common/dtype.hpp): fp32 computes everything in fp32. bf16 keeps fp32 master
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

#include "model/activation_policy.hpp"
#include "model/architecture.hpp"
#include "model/backend.hpp"
#include "model/block.hpp"
#include "model/bf16.hpp"
#include "model/counts.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"
#include "model/tp_comm.hpp"

namespace holmes::model {

class Gpt {
 public:
  // cfg is finalized here. backend and comm must outlive the model; comm == nullptr means
  // tp = 1 (cfg.tp_size must then be 1). max_B, max_T bound every later micro-batch.
  // slots: activation sets for micro-batches in flight at once (pipeline 1F1B); forward and
  // backward of one micro-batch must use the same slot. precision: see above; bf16 needs a
  // backend whose kernels support it (std::invalid_argument otherwise).
  // policy: what the activation slots keep and whether backward splits (above).
  Gpt(GptConfig cfg, Backend& backend, int max_B, int max_T, TensorParallelComm* comm = nullptr, int slots = 1,
      DType precision = DType::kF32, ActivationPolicy policy = {});
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // Each tensor as the architecture's init_rule says (gpt2: N(0, 0.02), c_proj N(0,
  // 0.02/sqrt(2L)), biases 0, LayerNorm weights 1; llama: every matrix N(0, 0.02), RMSNorm
  // weights 1); padded vocabulary rows 0. Every element is a pure function of (seed, tensor name, index in the full tensor), so
  // any tp/pp sharding holds exactly the slices of the same global model.
  void init_weights(uint64_t seed);

  // Whole model (first and last stage): returns the mean loss over B*T targets. tokens and
  // targets are host arrays; targets == nullptr computes logits only (inference), returns 0.
  // A target of -1 is not trained on: its loss counts 0 in the mean, its gradient is 0.
  // positions (B,T, host; needs policy().document_mask): each token's position in its
  // document (engine/data/batches.hpp), which attention and the positions (learned or
  // rotary) then follow; nullptr = one document per sequence.
  float forward(const int* tokens, const int* targets, int B, int T, const int* positions = nullptr);
  // Any stage: tokens (B,T, host) on the first stage, else input (B,T,C, backend memory);
  // targets (host) on the last; positions on every stage of a document-masked micro-batch.
  void forward_stage(const int* tokens, const float* input, const int* targets, int B, int T,
                     const int* positions = nullptr);

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
  // Floats of a (B,T,C) boundary tensor: B*T*C in fp32, ceil(B*T*C / 2) in bf16.
  size_t boundary_floats(int B, int T) const;

  // After anything wrote params() (an optimizer step; load_params and init_weights do it
  // themselves): refreshes the bf16 copy the kernels read. A no-op in fp32.
  void params_updated();
  // The same for the range [begin, end) of params() alone.
  void params_updated(size_t begin, size_t end);
  DType precision() const { return precision_; }  // of the activations and the weights copy
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
  // Model FLOPs of one forward+backward over B*T tokens on this shard (matmuls+attention;
  // model::shard_train_flops).
  double flops_per_step(int B, int T) const { return shard_train_flops(cfg_, B, T); }

 private:
  template <class A> struct Shared;       // the current slot's head and the shared scratch
  struct Offsets;                         // byte offsets of every activation buffer
  // What the block of local layer l sees for the current slot: its input x, weights,
  // gradients and buffers (a split backward's GEMM output gradients as `pass` needs them).
  template <class A> BlockIo<A> block_io(int local_layer, const A* x, int B, int T, Pass pass);
  template <class A> Shared<A> shared() const;
  template <class A> A* weights();  // what kernels read: params_ (fp32) or params16_ (bf16)
  template <class A> const A* stage_out() const;
  template <class A> void forward_t(const int* tokens, const float* input, const int* targets, int B, int T);
  template <class A> void head_forward(const int* targets, int B, int T);
  template <class A> void head_backward(float loss_scale, int B, int T, Pass pass);
  template <class A> void stage_backward(int B, int T, Pass pass);
  // The embedding's weight gradient (wte, wpe) of the current slot: from dres (kAll) or the
  // gradient B kept (kWeights); then the tied-gradient hook where wte is tied.
  template <class A> void embedding_weight_grad(int B, int T, Pass pass);
  template <class A> void run_backward(float loss_scale, const float* doutput, Pass pass);
  template <class A> void to_boundary(float* out, const A* x, size_t n);
  template <class A> void from_boundary(A* out, const float* x, size_t n);
  void plan_activations();
  // The block output of local layer l in the current slot (its Keep::kOutput buffer).
  template <class A> A* layer_output(int local_layer) const;
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
  bool is_bf16() const { return precision_ == DType::kBf16; }

  // What a slot remembers between its forward and backward besides its activations.
  struct SlotState {
    int B = 0, T = 0;
    bool have_targets = false;
    bool positions = false, masked = false;  // document positions uploaded; a target is -1
    int64_t loss_id = -1;  // the forward's entry in the loss log, -1 without targets
    bool weights_pending = false;  // split backward: B ran, W not yet
  };

  GptConfig cfg_;
  const Architecture& arch_;
  Backend& backend_;
  Kernels& k_;
  device::DeviceMemory& mem_;
  NoTensorParallel no_comm_;
  TensorParallelComm* comm_;
  int max_B_, max_T_;
  DType precision_;
  ActivationPolicy policy_;
  AttentionPlan attention_;
  BlockEnv env_;  // what every block call gets (block.hpp)
  ParamLayout layout_;
  device::DeviceArray<float> params_, grads_;
  device::DeviceArray<bf16> params16_;  // bf16 only: the weights the kernels read
  std::unique_ptr<Blocks> blocks_;      // the architecture's block (and its state)
  std::vector<LayerBuffer> buffers_;    // the architecture's per-layer buffers (counts.hpp)
  int output_buffer_ = -1;              // which of them is the block output (Keep::kOutput)
  // [slot 0 | slot 1 | ... | shared gradient scratch], carved by plan_activations().
  device::DeviceArray<std::byte> acts_;
  device::DeviceArray<int> token_store_, target_store_;  // (slots, max_B * max_T)
  device::DeviceArray<int> position_store_;               // the same, policy_.document_mask only
  const int* doc_pos() const;  // the slot's document positions; nullptr without
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
  bool positions_ = false, masked_ = false;
  int64_t loss_id_ = -1;
  bool weights_pending_ = false;
};

}  // namespace holmes::model
