// Where Gpt's activations live (gpt_buffers.hpp): the one allocation carved into slots, the
// working layer and the shared gradient scratch, and the pointers a layer's block gets. What
// each layer keeps per slot follows the activation policy (activation_policy.hpp) applied to
// the architecture's buffer table (counts.hpp: kept_in_slot).
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

void Gpt::plan_activations() {
  const size_t N = static_cast<size_t>(max_B_) * max_T_;
  const size_t C = cfg_.hidden, Vl = cfg_.local_vocab();
  const size_t a = is_bf16() ? sizeof(bf16) : sizeof(float), f = sizeof(float);
  const bool split = policy_.split_backward;
  buffers_ = arch_.layer_buffers(cfg_, static_cast<int64_t>(N), attention_);
  const std::vector<int64_t> scratch = arch_.gradient_scratch(cfg_, static_cast<int64_t>(N));
  if (buffers_.size() > static_cast<size_t>(kMaxLayerBuffers) || scratch.size() > static_cast<size_t>(kMaxScratch) ||
      layout_.tensors_per_layer() > static_cast<size_t>(kMaxLayerTensors))
    throw std::logic_error(fmt::format("Gpt: architecture {} has more per-layer buffers, scratch or tensors than "
                                       "model/block.hpp holds", arch_.name()));
  auto o = std::make_unique<Offsets>();
  o->layer_at.assign(buffers_.size(), 0);
  o->shared_grad.assign(buffers_.size(), 0);
  o->kept.assign(buffers_.size(), 0);
  Carver layer, work;
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const LayerBuffer& buf = buffers_[b];
    if (buf.keep == Keep::kOutput) output_buffer_ = static_cast<int>(b);
    o->kept[b] = kept_in_slot(buf, policy_, attention_.probabilities);
    // A gradient W reads exists only in a split backward (in the slot); else it has no bytes.
    const size_t elems = buf.keep == Keep::kWeightGrad && !split ? 0 : static_cast<size_t>(buf.elems);
    o->layer_at[b] = (o->kept[b] ? layer : work).take(elems, buf.fp32 ? f : a);
  }
  if (output_buffer_ < 0) throw std::logic_error(fmt::format("Gpt: architecture {} names no block output", arch_.name()));
  o->layer_bytes = layer.bytes;
  // A slot: the stage input, every layer's kept activations and the head's.
  const size_t means = norm_stats(arch_.final_norm()) == 2 ? N : 0;  // LayerNorm keeps its mean too
  Carver slot;
  o->encoded = slot.take(N * C, a);
  if (is_bf16() && !cfg_.has_head) o->out32 = slot.take((N * C + 1) / 2, f);  // bf16 pairs
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
  // A whole backward of a model that does not split: one buffer per GEMM output gradient,
  // every layer's (a split model's whole pass uses its slot's layer-0 buffers instead).
  for (size_t b = 0; b < buffers_.size(); ++b)
    if (buffers_[b].keep == Keep::kWeightGrad && !buffers_[b].residual_grad && !split)
      o->shared_grad[b] = all.take(static_cast<size_t>(buffers_[b].elems), a);
  for (int64_t n : scratch) o->arch_scratch.push_back(all.take(static_cast<size_t>(n), a));
  o->datt = all.take(attention_.scratch_floats, f);
  if (is_bf16() && !cfg_.has_embedding) o->grad32 = all.take((N * C + 1) / 2, f);  // bf16 pairs
  o->total = all.bytes;
  off_ = std::move(o);
  acts_ = device::DeviceArray<std::byte>(mem_, off_->total);
  acts_.zero();
  token_store_ = device::DeviceArray<int>(mem_, slots() * N);
  target_store_ = device::DeviceArray<int>(mem_, slots() * N);
  token_store_.zero();
  target_store_.zero();
  if (policy_.document_mask) {
    position_store_ = device::DeviceArray<int>(mem_, slots() * N);
    position_store_.zero();
  }
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
  v.datt = at<float>(g, o.datt);
  v.grad32 = at<float>(g, o.grad32);
  return v;
}

template <class A>
A* Gpt::layer_output(int local_layer) const {
  const Offsets& o = *off_;
  return at<A>(slot_base(slot_) + o.layers + local_layer * o.layer_bytes, o.layer_at[output_buffer_]);
}

template <class A>
BlockIo<A> Gpt::block_io(int local_layer, const A* x, int B, int T, Pass pass) {
  const Offsets& o = *off_;
  const Shared<A> s = shared<A>();
  std::byte* base = const_cast<std::byte*>(acts_.data());
  std::byte* kept = slot_base(slot_) + o.layers + local_layer * o.layer_bytes;
  std::byte* work = base + o.work;
  // A whole pass of a split model: its slot's layer-0 gradient buffers serve every layer, as
  // the shared ones do without a split (which such a model does not allocate). No W reads
  // them: the slot's micro-batch is the one this pass finishes.
  std::byte* whole = slot_base(slot_) + o.layers;
  BlockIo<A> io;
  io.B = B;
  io.T = T;
  io.pos = doc_pos();
  io.x = x;
  const size_t first = layer_first_tensor(local_layer);
  A* w = weights<A>();
  for (size_t j = 0; j < layout_.tensors_per_layer(); ++j) {
    const size_t offset = layout_.tensors()[first + j].offset;
    io.w[j] = w + offset;
    io.g[j] = grads_.data() + offset;
  }
  for (size_t b = 0; b < buffers_.size(); ++b) {
    std::byte* p = (o.kept[b] ? kept : work) + o.layer_at[b];
    if (buffers_[b].keep == Keep::kWeightGrad && pass == Pass::kAll) {
      if (buffers_[b].residual_grad)
        p = reinterpret_cast<std::byte*>(s.dres);
      else
        p = policy_.split_backward ? whole + o.layer_at[b] : base + o.shared_grad[b];
    }
    io.buf[b] = p;
  }
  for (size_t i = 0; i < o.arch_scratch.size(); ++i) io.scratch[i] = at<A>(base, o.arch_scratch[i]);
  io.out = s.scratch;
  io.dres = s.dres;
  io.dln = s.dln;
  io.datt = s.datt;
  return io;
}

template BlockIo<float> Gpt::block_io<float>(int, const float*, int, int, Pass);
template BlockIo<bf16> Gpt::block_io<bf16>(int, const bf16*, int, int, Pass);
template float* Gpt::layer_output<float>(int) const;
template bf16* Gpt::layer_output<bf16>(int) const;
template Gpt::Shared<float> Gpt::shared<float>() const;
template Gpt::Shared<bf16> Gpt::shared<bf16>() const;

}  // namespace holmes::model
