#include "model/gpt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "common/errors.hpp"
#include "model/gpt_buffers.hpp"

namespace holmes::model {

using gpt_detail::at;
using gpt_detail::Carver;

// The 12 tensors of one layer, in layout order (see param_layout.hpp for shapes).
template <class A>
struct Gpt::LayerParams {
  A *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};


Gpt::Gpt(GptConfig cfg, Backend& backend, int max_B, int max_T, TensorParallelComm* comm, int slots,
         Precision precision)
    : cfg_(cfg),
      backend_(backend),
      k_(*backend.kernels),
      mem_(*backend.memory),
      comm_(comm != nullptr ? comm : &no_comm_),
      max_B_(max_B),
      max_T_(max_T),
      precision_(precision) {
  if (slots < 1) throw std::invalid_argument(fmt::format("Gpt: {} activation slots; need at least 1", slots));
  if (!k_.supports(precision))
    throw std::invalid_argument(fmt::format("Gpt: backend {} has no {} kernels", k_.name(), precision_name(precision)));
  slot_state_.resize(slots);
  cfg_.finalize();
  if (comm_->size() != cfg_.tp_size || comm_->rank() != cfg_.tp_rank) {
    throw std::invalid_argument(fmt::format("Gpt: TP communicator is rank {} of {}, config says {} of {}",
                                            comm_->rank(), comm_->size(), cfg_.tp_rank, cfg_.tp_size));
  }
  if (max_B < 1 || max_T < 1 || max_T > cfg_.max_seq_len) {
    throw UserError(fmt::format("model: micro-batch shape B={} T={} is invalid; expected B >= 1 and "
                                "1 <= T <= max_seq_len ({})", max_B, max_T, cfg_.max_seq_len));
  }
  layout_ = ParamLayout(cfg_);
  params_ = device::DeviceArray<float>(mem_, layout_.size());
  grads_ = device::DeviceArray<float>(mem_, layout_.size());
  if (is_bf16()) params16_ = device::DeviceArray<bf16>(mem_, layout_.size());
  loss_log_ = device::DeviceArray<float>(mem_, kLossLog);
  params_.zero();
  grads_.zero();
  params16_.zero();
  attention_ = k_.plan_attention(precision_, max_B, max_T, cfg_.local_channels(), cfg_.local_heads(),
                                 cfg_.local_kv_heads());
  plan_activations();
  if (cfg_.is_llama()) make_rope_table();
}

Gpt::~Gpt() = default;

void Gpt::plan_activations() {
  const size_t N = static_cast<size_t>(max_B_) * max_T_;
  const size_t C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp(), QKV = cfg_.local_qkv();
  const size_t Vl = cfg_.local_vocab();
  const size_t a = is_bf16() ? sizeof(bf16) : sizeof(float), f = sizeof(float);
  // Llama: RMSNorm keeps no mean; the MLP's first GEMM is gate and up together (2Fl).
  const bool llama = cfg_.is_llama();
  const size_t means = llama ? 0 : N, mlp_in = llama ? 2 * Fl : Fl;
  auto o = std::make_unique<Offsets>();
  Carver layer;
  o->ln1 = layer.take(N * C, a);
  o->ln1_mean = layer.take(means, f);
  o->ln1_rstd = layer.take(N, f);
  o->qkv = layer.take(N * QKV, a);
  o->atty = layer.take(N * Cl, a);
  o->att = layer.take(attention_.state_floats, f);
  o->res2 = layer.take(N * C, a);
  o->ln2 = layer.take(N * C, a);
  o->ln2_mean = layer.take(means, f);
  o->ln2_rstd = layer.take(N, f);
  o->fch = layer.take(N * mlp_in, a);
  o->fch_gelu = layer.take(N * Fl, a);
  o->res3 = layer.take(N * C, a);
  o->layer_bytes = layer.bytes;
  // A slot: the stage input, every layer's saved activations and the head's.
  Carver slot;
  o->encoded = slot.take(N * C, a);
  if (is_bf16() && !cfg_.has_head) o->out32 = slot.take((N * C + 1) / 2, f);  // bf16 pairs
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
  o->scratch = all.take(N * C, a);
  o->dres = all.take(N * C, a);
  o->dln = all.take(N * C, a);
  o->dqkv = all.take(N * QKV, a);
  o->datty = all.take(N * Cl, a);
  o->dfch = all.take(N * mlp_in, a);
  o->dmlp = all.take(llama ? N * Fl : 0, a);
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
}

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

void Gpt::set_slot(int slot) {
  if (slot < 0 || slot >= slots())
    throw std::invalid_argument(fmt::format("Gpt::set_slot: slot {} outside [0, {})", slot, slots()));
  if (slot == slot_) return;
  slot_state_[slot_] = {B_, T_, have_targets_, loss_id_};
  const SlotState& next = slot_state_[slot];
  B_ = next.B;
  T_ = next.T;
  have_targets_ = next.have_targets;
  loss_id_ = next.loss_id;
  slot_ = slot;
}

size_t Gpt::layer_first_tensor(int local_layer) const {
  return layout_.embedding_tensors() + layout_.tensors_per_layer() * static_cast<size_t>(local_layer);
}

size_t Gpt::embedding_end() const {
  const size_t n = layout_.embedding_tensors();
  if (n == 0) return 0;
  const ParamTensor& last = layout_.tensors()[n - 1];
  return last.offset + last.numel;
}

template <class A>
Gpt::LayerParams<A> Gpt::layer_params(A* base, int local_layer) const {
  constexpr size_t kTensorsPerLayer = 12;  // GPT-2's (param_layout.hpp)
  const size_t first = layer_first_tensor(local_layer);
  A* t[kTensorsPerLayer];
  for (size_t j = 0; j < kTensorsPerLayer; ++j) t[j] = base + layout_.tensors()[first + j].offset;
  return {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11]};
}

template <class A>
Gpt::LayerActs<A> Gpt::layer_acts(int local_layer) const {
  const Offsets& o = *off_;
  std::byte* p = slot_base(slot_) + o.layers + local_layer * o.layer_bytes;
  return {at<A>(p, o.ln1),      at<float>(p, o.ln1_mean), at<float>(p, o.ln1_rstd), at<A>(p, o.qkv),
          at<A>(p, o.atty),     at<float>(p, o.att),      at<A>(p, o.res2),         at<A>(p, o.ln2),
          at<float>(p, o.ln2_mean), at<float>(p, o.ln2_rstd), at<A>(p, o.fch),      at<A>(p, o.fch_gelu),
          at<A>(p, o.res3)};
}

template <>
float* Gpt::weights<float>() {
  return params_.data();
}
template <>
bf16* Gpt::weights<bf16>() {
  return params16_.data();
}

void Gpt::params_updated() {
  if (is_bf16()) k_.convert(params16_.data(), params_.data(), params_.size());
}

void Gpt::params_updated(size_t begin, size_t end) {
  if (begin > end || end > params_.size())
    throw std::out_of_range(fmt::format("Gpt::params_updated: range [{}, {}) outside the {} parameters", begin, end,
                                        params_.size()));
  if (is_bf16() && begin < end) k_.convert(params16_.data() + begin, params_.data() + begin, end - begin);
}

std::pair<size_t, size_t> Gpt::layer_range(int local_layer) const {
  const size_t first = layer_first_tensor(local_layer);
  const ParamTensor& lo = layout_.tensors()[first];
  const ParamTensor& hi = layout_.tensors()[first + layout_.tensors_per_layer() - 1];
  return {lo.offset, hi.offset + hi.numel};
}

template <class A>
void Gpt::tp_sum(A* x, size_t n) {
  if constexpr (std::is_same_v<A, float>) {
    comm_->all_reduce_sum(x, n);
  } else if (comm_->size() != 1) {
    // bf16 in the activation precision: NCCL sums bf16 itself; a group over host memory widens
    // the shards to fp32, sums and rounds once (engine/parallel/group.hpp).
    comm_->all_reduce_sum_bf16(x, n);
  }
}

// The boundary holds the activation type's bytes (bf16: two values per float): a copy.
template <class A>
void Gpt::to_boundary(float* out, const A* x, size_t n) {
  if (static_cast<const void*>(out) != static_cast<const void*>(x)) mem_.copy(out, x, n * sizeof(A));
}

template <class A>
void Gpt::from_boundary(A* out, const float* x, size_t n) {
  mem_.copy(out, x, n * sizeof(A));
}

size_t Gpt::boundary_floats(int B, int T) const {
  const size_t n = static_cast<size_t>(B) * T * cfg_.hidden;
  return is_bf16() ? (n + 1) / 2 : n;
}

namespace {

// A token id outside [0, V) would index past the embedding or silently drop out of the loss.
void check_ids(const int* ids, size_t n, int V, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= V) {
      throw UserError(fmt::format("model input: {} id {} at position {} is outside the vocabulary [0, {})",
                                  what, ids[i], i, V));
    }
  }
}

}  // namespace

void Gpt::check_shape(int B, int T) const {
  if (B < 1 || T < 1 || B > max_B_ || T > max_T_) {
    throw std::invalid_argument(fmt::format("Gpt: micro-batch B={} T={} outside the planned B<={} T<={}",
                                            B, T, max_B_, max_T_));
  }
}

template <class A>
const A* Gpt::stage_out() const {
  const int L = cfg_.num_stage_layers();
  return L == 0 ? shared<A>().encoded : layer_acts<A>(L - 1).res3;
}

const float* Gpt::output() const {
  if (is_bf16()) return shared<bf16>().out32;
  return stage_out<float>();
}

const float* Gpt::input_grad() const {
  if (is_bf16()) return shared<bf16>().grad32;
  return shared<float>().dres;
}

const float* Gpt::losses() const {
  return cfg_.has_head ? at<float>(slot_base(slot_), off_->losses) : nullptr;
}

void Gpt::read_logits(size_t row, std::span<float> host) const {
  const size_t Vl = cfg_.local_vocab();
  if (!cfg_.has_head || row >= static_cast<size_t>(B_) * T_ || host.size() != Vl)
    throw std::invalid_argument(fmt::format("Gpt::read_logits: row {} of {} into {} floats (Vl = {})", row,
                                            static_cast<size_t>(B_) * T_, host.size(), Vl));
  std::byte* logits = slot_base(slot_) + off_->logits;
  if (!is_bf16()) {
    mem_.download(host.data(), at<float>(logits, 0) + row * Vl, Vl * sizeof(float));
    return;
  }
  std::vector<bf16> raw(Vl);
  mem_.download(raw.data(), at<bf16>(logits, 0) + row * Vl, Vl * sizeof(bf16));
  for (size_t i = 0; i < Vl; ++i) host[i] = bf16_to_float(raw[i]);
}

float Gpt::forward(const int* tokens, const int* targets, int B, int T) {
  if (!cfg_.has_embedding || !cfg_.has_head) {
    throw std::logic_error("Gpt::forward needs the whole model; use forward_stage on a pipeline stage");
  }
  forward_stage(tokens, nullptr, targets, B, T);
  return loss();
}

float Gpt::loss() const {
  if (loss_id_ < 0) return 0.0f;
  if (loss_id_ < logged_ - kLossLog)
    throw std::logic_error("Gpt::loss: the loss of that forward was overwritten in the loss log");
  float v = 0.0f;
  mem_.download(&v, loss_log_.data() + loss_id_ % kLossLog, sizeof(float));
  return v;
}

void Gpt::read_pending_losses() {
  // Entries taken_ .. logged_ - 1 of the ring: at most two contiguous pieces.
  const int64_t n = logged_ - taken_;
  const size_t before = early_.size();
  early_.resize(before + static_cast<size_t>(n));
  for (int64_t done = 0; done < n;) {
    const int64_t at = (taken_ + done) % kLossLog, len = std::min(n - done, kLossLog - at);
    mem_.download(early_.data() + before + done, loss_log_.data() + at, static_cast<size_t>(len) * sizeof(float));
    done += len;
  }
  taken_ = logged_;
}

double Gpt::take_loss_sum() {
  read_pending_losses();
  double sum = 0;
  for (float v : early_) sum += v;
  early_.clear();
  return sum;
}

void Gpt::forward_stage(const int* tokens, const float* input, const int* targets, int B, int T) {
  check_shape(B, T);
  B_ = B;
  T_ = T;
  if (is_bf16())
    forward_t<bf16>(tokens, input, targets, B, T);
  else
    forward_t<float>(tokens, input, targets, B, T);
}

template <class A>
void Gpt::forward_t(const int* tokens, const float* input, const int* targets, int B, int T) {
  const size_t N = static_cast<size_t>(B) * T, C = cfg_.hidden;
  const Shared<A> s = shared<A>();
  if (cfg_.has_embedding) {
    check_ids(tokens, N, cfg_.vocab, "token");
    params_needed(0, embedding_end());
    int* tok = token_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_;
    mem_.upload(tok, tokens, N * sizeof(int));
    // Vocabulary-parallel lookup: each shard fills the rows of its tokens, rank 0 adds the
    // positions (gpt2; llama has none), the sum over TP is the full embedding.
    A* w = weights<A>();
    const RoleNames names = role_names(cfg_);
    const A* wpe = cfg_.tp_rank == 0 && !cfg_.is_llama() ? w + layout_.at(names.positions).offset : nullptr;
    k_.embedding_forward(s.encoded, tok, w + layout_.at(names.embedding).offset, wpe, B, T, cfg_.hidden,
                         cfg_.vocab_begin(), cfg_.local_vocab());
    tp_sum(s.encoded, N * C);
  } else {
    from_boundary(s.encoded, input, N * C);
  }
  const A* x = s.encoded;
  for (int l = 0; l < cfg_.num_stage_layers(); ++l) {
    const auto [lo, hi] = layer_range(l);
    params_needed(lo, hi);
    block_forward<A>(l, x, B, T);
    x = layer_acts<A>(l).res3;
  }
  have_targets_ = false;
  loss_id_ = -1;
  if (cfg_.has_head) {
    params_needed(layout_.at(role_names(cfg_).final_norm_weight).offset, layout_.size());
    head_forward<A>(targets, B, T);
  }
  else if constexpr (!std::is_same_v<A, float>)
    to_boundary(s.out32, x, N * C);
}

template <class A>
void Gpt::block_forward(int l, const A* x, int B, int T) {
  if (cfg_.is_llama()) return llama_block_forward<A>(l, x, B, T);
  const LayerParams<A> p = layer_params(weights<A>(), l);
  const LayerActs<A> a = layer_acts<A>(l);
  const Shared<A> s = shared<A>();
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const bool rank0 = cfg_.tp_rank == 0;  // row-parallel biases are added once, before the sum
  k_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, N, C);
  k_.matmul_forward(a.qkv, a.ln1, p.qkvw, p.qkvb, N, C, 3 * Cl);
  k_.attention_forward(a.atty, a.att, a.qkv, B, T, Cl, cfg_.local_heads(), cfg_.local_kv_heads());
  k_.matmul_forward(s.scratch, a.atty, p.attprojw, rank0 ? p.attprojb : nullptr, N, Cl, C);
  tp_sum(s.scratch, static_cast<size_t>(N) * C);
  k_.residual_forward(a.res2, x, s.scratch, static_cast<size_t>(N) * C);
  k_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, p.ln2w, p.ln2b, N, C);
  k_.matmul_gelu_forward(a.fch_gelu, a.fch, a.ln2, p.fcw, p.fcb, N, C, Fl);
  k_.matmul_forward(s.scratch, a.fch_gelu, p.fcprojw, rank0 ? p.fcprojb : nullptr, N, Fl, C);
  tp_sum(s.scratch, static_cast<size_t>(N) * C);
  k_.residual_forward(a.res3, a.res2, s.scratch, static_cast<size_t>(N) * C);
}

template <class A>
void Gpt::head_forward(const int* targets, int B, int T) {
  const int N = B * T, C = cfg_.hidden, Vl = cfg_.local_vocab(), vb = cfg_.vocab_begin();
  const Shared<A> s = shared<A>();
  const A* x = stage_out<A>();
  A* W = weights<A>();
  const RoleNames names = role_names(cfg_);
  const A* norm_w = W + layout_.at(names.final_norm_weight).offset;
  if (cfg_.is_llama())
    k_.rmsnorm_forward(s.lnf, s.lnf_rstd, x, norm_w, N, C, cfg_.norm_eps);
  else
    k_.layernorm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, x, norm_w, W + layout_.at(names.final_norm_bias).offset, N,
                         C);
  k_.matmul_forward(s.logits, s.lnf, W + layout_.at(names.head).offset, nullptr, N, C, Vl);
  if (targets == nullptr) return;
  check_ids(targets, N, cfg_.vocab, "target");
  int* tgt = target_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_;
  mem_.upload(tgt, targets, static_cast<size_t>(N) * sizeof(int));
  if (comm_->size() == 1) {
    // Nothing to all-reduce between the first two passes: one read of the logits.
    k_.crossentropy_fused_forward(s.row_max, s.ce_stats, s.logits, tgt, N, Vl, vb, cfg_.vocab);
  } else {
    k_.crossentropy_max_forward(s.row_max, s.logits, N, Vl, vb, cfg_.vocab);
    comm_->all_reduce_max(s.row_max, N);
    k_.crossentropy_stats_forward(s.ce_stats, s.logits, s.row_max, tgt, N, Vl, vb, cfg_.vocab);
    comm_->all_reduce_sum(s.ce_stats, 2 * static_cast<size_t>(N));
  }
  k_.crossentropy_forward(s.losses, s.ce_stats, s.row_max, N);
  if (logged_ - taken_ == kLossLog) read_pending_losses();  // the log is full: read them now
  loss_id_ = logged_++;
  k_.mean_forward(loss_log_.data() + loss_id_ % kLossLog, s.losses, N);
  have_targets_ = true;
}

void Gpt::zero_grad() { grads_.zero(); }

void Gpt::load_params(std::span<const float> host) {
  if (host.size() != params_.size())
    throw std::invalid_argument(fmt::format("Gpt::load_params: {} floats for a buffer of {}", host.size(),
                                            params_.size()));
  params_.upload(host);
  params_updated();
}

void Gpt::read_params(std::span<float> host) const {
  if (host.size() != params_.size())
    throw std::invalid_argument(fmt::format("Gpt::read_params: {} floats for a buffer of {}", host.size(),
                                            params_.size()));
  params_.download(host);
}

std::vector<float> Gpt::read_params() const {
  std::vector<float> host(params_.size());
  read_params(host);
  return host;
}

void Gpt::backward(float loss_scale) {
  if (!cfg_.has_head || !have_targets_) {
    throw std::logic_error("Gpt::backward needs a forward with targets on the last stage, once per forward");
  }
  have_targets_ = false;  // the logits are overwritten by their gradient below
  if (is_bf16()) {
    head_backward<bf16>(loss_scale, B_, T_);
    stage_backward<bf16>(B_, T_);
  } else {
    head_backward<float>(loss_scale, B_, T_);
    stage_backward<float>(B_, T_);
  }
}

void Gpt::backward_stage(const float* doutput) {
  if (cfg_.has_head) throw std::logic_error("Gpt::backward_stage is for non-last stages; use backward()");
  const size_t n = static_cast<size_t>(B_) * T_ * cfg_.hidden;
  if (is_bf16()) {
    from_boundary(shared<bf16>().dres, doutput, n);
    stage_backward<bf16>(B_, T_);
  } else {
    from_boundary(shared<float>().dres, doutput, n);
    stage_backward<float>(B_, T_);
  }
}

template <class A>
void Gpt::head_backward(float loss_scale, int B, int T) {
  const int N = B * T, C = cfg_.hidden, Vl = cfg_.local_vocab(), vb = cfg_.vocab_begin();
  const Shared<A> s = shared<A>();
  const int* tgt = target_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_;
  const float dloss = loss_scale / static_cast<float>(N);
  k_.crossentropy_backward(s.logits, s.logits, s.row_max, s.ce_stats, tgt, dloss, N, Vl, vb, cfg_.vocab);
  const RoleNames names = role_names(cfg_);
  const ParamTensor& head = layout_.at(names.head);
  k_.matmul_backward(s.dln, grads_.data() + head.offset, nullptr, s.logits, s.lnf, weights<A>() + head.offset, N,
                     C, Vl);
  tp_sum(s.dln, static_cast<size_t>(N) * C);  // each shard saw Vl of the Vp columns
  mem_.zero(s.dres, static_cast<size_t>(N) * C * sizeof(A));
  const size_t w = layout_.at(names.final_norm_weight).offset;
  if (cfg_.is_llama()) {
    k_.rmsnorm_backward(s.dres, grads_.data() + w, s.dln, stage_out<A>(), weights<A>() + w, s.lnf_rstd, N, C);
  } else {
    const size_t b = layout_.at(names.final_norm_bias).offset;
    k_.layernorm_backward(s.dres, grads_.data() + w, grads_.data() + b, s.dln, stage_out<A>(), weights<A>() + w,
                          s.lnf_mean, s.lnf_rstd, N, C);
  }
  // The final norm, an untied head and a tied copy of the embedding are final; a whole
  // model's tied embedding waits for the embedding backward.
  grad_ready(w, layout_.size());
}

template <class A>
void Gpt::stage_backward(int B, int T) {
  const Shared<A> s = shared<A>();
  for (int l = cfg_.num_stage_layers() - 1; l >= 0; --l) {
    block_backward<A>(l, l == 0 ? s.encoded : layer_acts<A>(l - 1).res3, B, T);
    const auto [lo, hi] = layer_range(l);
    grad_ready(lo, hi);
  }
  if (cfg_.has_embedding) {
    const RoleNames names = role_names(cfg_);
    const size_t wte = layout_.at(names.embedding).offset;
    float* dwpe = cfg_.is_llama() ? nullptr : grads_.data() + layout_.at(names.positions).offset;
    const int* tok = token_store_.data() + slot_ * static_cast<size_t>(max_B_) * max_T_;
    k_.embedding_backward(grads_.data() + wte, dwpe, s.dres, tok, B, T, cfg_.hidden, cfg_.vocab_begin(),
                          cfg_.local_vocab());
    grad_ready(0, embedding_end());
  } else if constexpr (!std::is_same_v<A, float>) {
    to_boundary(s.grad32, s.dres, static_cast<size_t>(B) * T * cfg_.hidden);
  }
}

template <class A>
void Gpt::block_backward(int l, const A* x, int B, int T) {
  if (cfg_.is_llama()) return llama_block_backward<A>(l, x, B, T);
  const LayerParams<A> p = layer_params(weights<A>(), l);
  const LayerParams<float> g = layer_params(grads_.data(), l);
  const LayerActs<A> a = layer_acts<A>(l);
  const Shared<A> s = shared<A>();
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const size_t NC = static_cast<size_t>(N) * C;
  // dres holds d(res3); the residual passes it straight to res2 and to the MLP output.
  k_.matmul_dgelu_backward(s.dfch, g.fcprojw, g.fcprojb, s.dres, a.fch_gelu, p.fcprojw, a.fch, N, Fl, C);
  k_.matmul_backward(s.dln, g.fcw, g.fcb, s.dfch, a.ln2, p.fcw, N, C, Fl);
  tp_sum(s.dln, NC);  // column-parallel input gradient is partial per shard
  k_.layernorm_backward(s.dres, g.ln2w, g.ln2b, s.dln, a.res2, p.ln2w, a.ln2_mean, a.ln2_rstd, N, C);
  // dres now holds d(res2).
  k_.matmul_backward(s.datty, g.attprojw, g.attprojb, s.dres, a.atty, p.attprojw, N, Cl, C);
  k_.attention_backward(s.dqkv, s.datt, s.datty, a.qkv, a.atty, a.att, B, T, Cl, cfg_.local_heads(),
                        cfg_.local_kv_heads());
  k_.matmul_backward(s.dln, g.qkvw, g.qkvb, s.dqkv, a.ln1, p.qkvw, N, C, 3 * Cl);
  tp_sum(s.dln, NC);
  k_.layernorm_backward(s.dres, g.ln1w, g.ln1b, s.dln, x, p.ln1w, a.ln1_mean, a.ln1_rstd, N, C);
  // dres now holds d(x), the gradient of the layer input.
}

double Gpt::flops_per_step(const GptConfig& cfg, int B, int T) {
  const double N = static_cast<double>(B) * T, C = cfg.hidden;
  const double Cl = cfg.local_channels(), Fl = cfg.local_mlp();
  // qkv, attention output, MLP (gpt2: fc, proj; llama: gate, up, down).
  const double layer_weights = cfg.local_qkv() * C + Cl * C + (cfg.is_llama() ? 3 : 2) * Fl * C;
  double fwd = cfg.num_stage_layers() * (2 * N * layer_weights + 4.0 * B * T * T * Cl);
  if (cfg.has_head) fwd += 2 * N * C * cfg.local_vocab();
  return 3 * fwd;  // backward costs twice the forward
}

// Used by llama_block.cpp too.
template Gpt::LayerActs<float> Gpt::layer_acts<float>(int) const;
template Gpt::LayerActs<bf16> Gpt::layer_acts<bf16>(int) const;
template Gpt::Shared<float> Gpt::shared<float>() const;
template Gpt::Shared<bf16> Gpt::shared<bf16>() const;
template void Gpt::tp_sum<float>(float*, size_t);
template void Gpt::tp_sum<bf16>(bf16*, size_t);

}  // namespace holmes::model
