// Gpt's backward over a stage: the head, the blocks from the last (each replayed first when
// the activation policy dropped some of its activations), the embedding. One pass (Pass::kAll)
// or, split for a zero-bubble schedule, B (kInput) now and W (kWeights) later; the GEMM
// weight gradients and the embedding's are W, the rest B (gpt.hpp: ActivationPolicy). W runs
// the embedding's first, so a tied embedding's share is final before the blocks' W.
#include <fmt/format.h>

#include <stdexcept>
#include <type_traits>

#include "model/gpt_buffers.hpp"

namespace holmes::model {

namespace {

void check_pass(const ActivationPolicy& policy, Pass pass, const char* fn) {
  if (pass == Pass::kWeights)
    throw std::logic_error(fmt::format("Gpt::{}: W runs through backward_weights()", fn));
  if (pass == Pass::kInput && !policy.split_backward)
    throw std::logic_error(fmt::format("Gpt::{}: a B pass needs a model built with split_backward", fn));
}

}  // namespace

void Gpt::backward(float loss_scale, Pass pass) {
  if (!cfg_.has_head || !have_targets_) {
    throw std::logic_error("Gpt::backward needs a forward with targets on the last stage, once per forward");
  }
  check_pass(policy_, pass, "backward");
  have_targets_ = false;  // the logits are overwritten by their gradient below
  if (is_bf16())
    run_backward<bf16>(loss_scale, nullptr, pass);
  else
    run_backward<float>(loss_scale, nullptr, pass);
  weights_pending_ = pass == Pass::kInput;
}

void Gpt::backward_stage(const float* doutput, Pass pass) {
  if (cfg_.has_head) throw std::logic_error("Gpt::backward_stage is for non-last stages; use backward()");
  check_pass(policy_, pass, "backward_stage");
  if (is_bf16())
    run_backward<bf16>(0.0f, doutput, pass);
  else
    run_backward<float>(0.0f, doutput, pass);
  weights_pending_ = pass == Pass::kInput;
}

void Gpt::backward_weights() {
  if (!weights_pending_)
    throw std::logic_error(fmt::format("Gpt::backward_weights: slot {} has no B pass waiting for its W", slot_));
  if (is_bf16())
    run_backward<bf16>(0.0f, nullptr, Pass::kWeights);
  else
    run_backward<float>(0.0f, nullptr, Pass::kWeights);
  weights_pending_ = false;
}

template <class A>
void Gpt::run_backward(float loss_scale, const float* doutput, Pass pass) {
  if (cfg_.has_head)
    head_backward<A>(loss_scale, B_, T_, pass);
  else if (pass != Pass::kWeights)
    from_boundary(shared<A>().dres, doutput, static_cast<size_t>(B_) * T_ * cfg_.hidden);
  stage_backward<A>(B_, T_, pass);
}

template <class A>
void Gpt::head_backward(float loss_scale, int B, int T, Pass pass) {
  const int N = B * T, C = cfg_.hidden, Vl = cfg_.local_vocab(), vb = cfg_.vocab_begin();
  const Shared<A> s = shared<A>();
  const RoleNames names = arch_.role_names(cfg_);
  const ParamTensor& head = layout_.at(names.head);
  const size_t w = layout_.at(names.final_norm_weight).offset;
  const bool input = pass != Pass::kWeights;
  const int* tgt = target_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_;
  const float dloss = loss_scale / static_cast<float>(N);
  // The logits' gradient overwrites them in this slot, where W finds it.
  if (input) k_.crossentropy_backward(s.logits, s.logits, s.row_max, s.ce_stats, tgt, dloss, N, Vl, vb, cfg_.vocab);
  if (input && masked_) k_.mask_rows(s.logits, tgt, N, Vl);  // -1 targets: no gradient
  gemm_backward<A>(env_, pass, s.dln, grads_.data() + head.offset, nullptr, s.logits, s.lnf, weights<A>() + head.offset,
                   N, C, Vl);
  if (input) {
    tp_sum(env_, s.dln, static_cast<size_t>(N) * C);  // each shard saw Vl of the Vp columns
    mem_.zero(s.dres, static_cast<size_t>(N) * C * sizeof(A));
    switch (arch_.final_norm()) {
      case NormKind::kLayerNorm: {
        const size_t b = layout_.at(names.final_norm_bias).offset;
        k_.layernorm_backward(s.dres, grads_.data() + w, grads_.data() + b, s.dln, stage_out<A>(), weights<A>() + w,
                              s.lnf_mean, s.lnf_rstd, N, C);
        break;
      }
      case NormKind::kRmsNorm:
        k_.rmsnorm_backward(s.dres, grads_.data() + w, s.dln, stage_out<A>(), weights<A>() + w, s.lnf_rstd, N, C);
        break;
    }
  }
  // The final norm, an untied head and a tied copy of the embedding are final; a whole
  // model's tied embedding waits for the embedding backward.
  if (pass != Pass::kInput) {
    grad_ready(w, layout_.size());
    if (head.tied_copy && tied_grad_) tied_grad_();
  }
}

template <class A>
void Gpt::stage_backward(int B, int T, Pass pass) {
  const Shared<A> s = shared<A>();
  const size_t NC = static_cast<size_t>(B) * T * cfg_.hidden;
  // W: the embedding's gradient (from the input gradient B kept) first, so that a tied
  // embedding's sum can leave while the blocks' W runs (set_tied_grad_hook); it adds into
  // wte and wpe alone, so every sum keeps its order.
  if (cfg_.has_embedding && pass == Pass::kWeights) embedding_weight_grad<A>(B, T, pass);
  for (int l = cfg_.num_stage_layers() - 1; l >= 0; --l) {
    const A* x = l == 0 ? s.encoded : layer_output<A>(l - 1);
    const BlockIo<A> io = block_io<A>(l, x, B, T, pass);
    // B reads what the policy dropped; W reads the GEMM inputs among them (the norms' and
    // the activation function's outputs, attention's output).
    if (policy_.recompute != Recompute::kNone) blocks_->recompute(env_, io);
    blocks_->backward(env_, io, pass);
    const auto [lo, hi] = layer_range(l);
    if (pass != Pass::kInput) grad_ready(lo, hi);
  }
  if (cfg_.has_embedding) {
    // The embedding's gradient is a weight gradient: W, from the input gradient B kept.
    if (pass == Pass::kInput) {
      keep_grad(env_, s.dencoded, s.dres, NC);
      return;
    }
    if (pass == Pass::kAll) embedding_weight_grad<A>(B, T, pass);
    grad_ready(0, embedding_end());  // ranges still arrive in descending order
  } else if constexpr (!std::is_same_v<A, float>) {
    if (pass != Pass::kWeights) to_boundary(s.grad32, s.dres, NC);
  }
}

template <class A>
void Gpt::embedding_weight_grad(int B, int T, Pass pass) {
  const Shared<A> s = shared<A>();
  const RoleNames names = arch_.role_names(cfg_);
  const ParamTensor& emb = layout_.at(names.embedding);
  float* dwpe = names.positions.empty() ? nullptr : grads_.data() + layout_.at(names.positions).offset;
  const int* tok = token_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_;
  k_.embedding_backward(grads_.data() + emb.offset, dwpe, pass == Pass::kWeights ? s.dencoded : s.dres, tok, doc_pos(),
                        B, T, cfg_.hidden, cfg_.vocab_begin(), cfg_.local_vocab());
  if (emb.tied_embedding && tied_grad_) tied_grad_();
}

}  // namespace holmes::model
