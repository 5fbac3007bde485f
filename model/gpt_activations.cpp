// Where Gpt's activations live (gpt_buffers.hpp): the one allocation carved into slots, the
// working layer and the shared gradient scratch, and the pointers a layer's kernels get. What
// each layer keeps per slot follows the activation policy (gpt.hpp: Recompute, split_backward).
#include <fmt/format.h>

#include <stdexcept>

#include "model/gpt_buffers.hpp"

namespace holmes::model {

using gpt_detail::at;
using gpt_detail::Carver;

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

namespace {

// Whether layer buffer b stays in the slot from the forward to the backward (else the
// working layer holds it: replayed before the backward, or unused).
bool kept_in_slot(LayerBuf b, const ActivationPolicy& policy, bool attention_probabilities) {
  if (b >= kGradRes3) return policy.split_backward;  // gradients B leaves for W
  switch (policy.recompute) {
    case Recompute::kNone: return true;
    case Recompute::kFull: return b == kRes3;  // the next layer's input
    case Recompute::kSelective:
      if (b == kAtty || b == kAtt) return !attention_probabilities;  // a fused attention's small state stays
      return b == kQkv || b == kRes2 || b == kFch || b == kRes3;
  }
  return true;
}

}  // namespace

void Gpt::plan_activations() {
  const size_t N = static_cast<size_t>(max_B_) * max_T_;
  const size_t C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp(), QKV = cfg_.local_qkv();
  const size_t Vl = cfg_.local_vocab();
  const size_t a = is_bf16() ? sizeof(bf16) : sizeof(float), f = sizeof(float);
  // Llama: RMSNorm keeps no mean; the MLP's first GEMM is gate and up together (2Fl).
  const bool llama = cfg_.is_llama(), split = policy_.split_backward;
  const size_t means = llama ? 0 : N, mlp_in = llama ? 2 * Fl : Fl, grads = split ? 1 : 0;
  // Elements and element size of each layer buffer, in LayerBuf order.
  const std::pair<size_t, size_t> sizes[kLayerBufs] = {
      {N * C, a},      {means, f},       {N, f},         {N * QKV, a},          {N * Cl, a},
      {attention_.state_floats, f},      {N * C, a},     {N * C, a},            {means, f},
      {N, f},          {N * mlp_in, a},  {N * Fl, a},    {N * C, a},            {grads * N * C, a},
      {grads * N * mlp_in, a},           {grads * N * C, a}, {grads * N * QKV, a}};
  auto o = std::make_unique<Offsets>();
  Carver layer, work;
  for (int b = 0; b < kLayerBufs; ++b) {
    const auto buf = static_cast<LayerBuf>(b);
    o->kept[b] = kept_in_slot(buf, policy_, attention_.probabilities);
    o->layer_at[b] = (o->kept[b] ? layer : work).take(sizes[b].first, sizes[b].second);
  }
  o->layer_bytes = layer.bytes;
  // A slot: the stage input, every layer's kept activations and the head's.
  Carver slot;
  o->encoded = slot.take(N * C, a);
  if (packed_boundary() && !cfg_.has_head) o->out32 = slot.take(boundary_floats(max_B_, max_T_), f);
  if (split && cfg_.has_embedding) o->dencoded = slot.take(N * C, a);         // the embedding's W reads it
  o->layers = slot.take(cfg_.num_stage_layers() * o->layer_bytes, 1);
  if (cfg_.has_head) {
    o->lnf = slot.take(N * C, a);
    o->lnf_mean = slot.take(means, f);
    o->lnf_rstd = slot.take(N, f);
    o->logits = slot.take(N * Vl, a);
    o->losses = slot.take(N, f);
    o->row_max = slot.take(N, f);
    o->ce_stats = slot.take(2 * N, f);
  }
  o->slot_bytes = slot.bytes;
  Carver all{slots() * o->slot_bytes};
  o->work = all.take(cfg_.num_stage_layers() > 0 ? work.bytes : 0, 1);
  o->scratch = all.take(N * C, a);
  o->dres = all.take(N * C, a);
  o->dln = all.take(N * C, a);
  o->dqkv = all.take(split ? 0 : N * QKV, a);  // a split backward keeps them per layer
  o->datty = all.take(N * Cl, a);
  o->dfch = all.take(split ? 0 : N * mlp_in, a);
  o->dmlp = all.take(llama ? N * Fl : 0, a);
  o->datt = all.take(attention_.scratch_floats, f);
  if (packed_boundary() && !cfg_.has_embedding) o->grad32 = all.take(boundary_floats(max_B_, max_T_), f);
  o->total = all.bytes;
  off_ = std::move(o);
  acts_ = device::DeviceArray<std::byte>(mem_, off_->total);
  acts_.zero();
  token_store_ = device::DeviceArray<int>(mem_, slots() * N);
  target_store_ = device::DeviceArray<int>(mem_, slots() * N);
  token_store_.zero();
  target_store_.zero();
}

size_t Gpt::layer_slot_bytes() const { return off_->layer_bytes; }

std::byte* Gpt::slot_base(int slot) const {
  return const_cast<std::byte*>(acts_.data()) + slot * off_->slot_bytes;
}

template <class A>
Gpt::Shared<A> Gpt::shared() const {
  std::byte* s = slot_base(slot_);
  std::byte* g = const_cast<std::byte*>(acts_.data());
  const Offsets& o = *off_;
  Shared<A> v{};
  v.encoded = at<A>(s, o.encoded);
  v.out32 = at<float>(s, o.out32);
  v.dencoded = policy_.split_backward && cfg_.has_embedding ? at<A>(s, o.dencoded) : nullptr;
  if (cfg_.has_head) {
    v.lnf = at<A>(s, o.lnf);
    v.lnf_mean = at<float>(s, o.lnf_mean);
    v.lnf_rstd = at<float>(s, o.lnf_rstd);
    v.logits = at<A>(s, o.logits);
    v.losses = at<float>(s, o.losses);
    v.row_max = at<float>(s, o.row_max);
    v.ce_stats = at<float>(s, o.ce_stats);
  }
  v.scratch = at<A>(g, o.scratch);
  v.dres = at<A>(g, o.dres);
  v.dln = at<A>(g, o.dln);
  v.dqkv = at<A>(g, o.dqkv);
  v.datty = at<A>(g, o.datty);
  v.dfch = at<A>(g, o.dfch);
  v.dmlp = at<A>(g, o.dmlp);
  v.datt = at<float>(g, o.datt);
  v.grad32 = at<float>(g, o.grad32);
  return v;
}

template <class A>
Gpt::LayerActs<A> Gpt::layer_acts(int local_layer) const {
  const Offsets& o = *off_;
  std::byte* kept = slot_base(slot_) + o.layers + local_layer * o.layer_bytes;
  std::byte* work = const_cast<std::byte*>(acts_.data()) + o.work;
  auto p = [&](LayerBuf b) { return (o.kept[b] ? kept : work) + o.layer_at[b]; };
  return {at<A>(p(kLn1), 0),     at<float>(p(kLn1Mean), 0), at<float>(p(kLn1Rstd), 0), at<A>(p(kQkv), 0),
          at<A>(p(kAtty), 0),    at<float>(p(kAtt), 0),     at<A>(p(kRes2), 0),        at<A>(p(kLn2), 0),
          at<float>(p(kLn2Mean), 0), at<float>(p(kLn2Rstd), 0), at<A>(p(kFch), 0),     at<A>(p(kFchAct), 0),
          at<A>(p(kRes3), 0)};
}

template <class A>
Gpt::LayerGrads<A> Gpt::layer_grads(int local_layer, Pass pass) const {
  const Shared<A> s = shared<A>();
  if (!policy_.split_backward) return {s.dres, s.dfch, s.dres, s.dqkv};
  const Offsets& o = *off_;
  // A whole pass of a split model: its slot's layer-0 buffers serve every layer, as the
  // shared scratch does without a split (which such a model does not allocate). No W reads
  // them: the slot's micro-batch is the one this pass finishes.
  if (pass == Pass::kAll) local_layer = 0;
  std::byte* p = slot_base(slot_) + o.layers + local_layer * o.layer_bytes;
  if (pass == Pass::kAll) return {s.dres, at<A>(p, o.layer_at[kGradFch]), s.dres, at<A>(p, o.layer_at[kGradQkv])};
  return {at<A>(p, o.layer_at[kGradRes3]), at<A>(p, o.layer_at[kGradFch]), at<A>(p, o.layer_at[kGradRes2]),
          at<A>(p, o.layer_at[kGradQkv])};
}

template Gpt::LayerActs<float> Gpt::layer_acts<float>(int) const;
template Gpt::LayerActs<bf16> Gpt::layer_acts<bf16>(int) const;
template Gpt::LayerGrads<float> Gpt::layer_grads<float>(int, Pass) const;
template Gpt::LayerGrads<bf16> Gpt::layer_grads<bf16>(int, Pass) const;
template Gpt::Shared<float> Gpt::shared<float>() const;
template Gpt::Shared<bf16> Gpt::shared<bf16>() const;

}  // namespace holmes::model
